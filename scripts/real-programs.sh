#!/usr/bin/env bash
# Programs nobody here wrote, under `coldcache record --all`, as a new user
# would run them: each command runs natively, then captured (fast mode by
# default), and its standard output and exit status must be the same. It
# prints, per program, the instructions captured, the share that ran under
# the trap engine and the wall time. Programs that are not installed are
# skipped. Not a CI test (it depends on what the machine has, and takes
# minutes); run it after changing the capture engine.
#
#   scripts/real-programs.sh [MODE [NAME...]]
#
# MODE: fast (default), trap or auto; NAMEs: a subset of the cases below.
# Stop 50 found three failures with it: CPython's start-up changed by our
# errno, `--all` refusing every stripped binary, rustc running 12% trapped.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-fast}
shift || true
want=" $* "
bin=$(scripts/release-dir.sh)/coldcache
[ -x "$bin" ] || { echo "build first: cargo build --release -p coldcache-cli -p libcoldcache" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat "$OLDPWD"/crates/account/src/*.rs > in.txt
echo '[1,2,3,{"a":[4,5]}]' > in.json
echo 'set s 0; for {set i 0} {$i < 20000} {incr i} {incr s [expr {$i % 13}]}; puts $s' > t.tcl
printf '#include <stdio.h>\nint main(void) { int s = 0; for (int i = 0; i < 10; i++) s += i * i; printf("%%d\\n", s); return 0; }\n' > small.c
printf '#include <vector>\n#include <algorithm>\nint f() { std::vector<int> v{3, 1, 2}; std::sort(v.begin(), v.end()); return v[0]; }\n' > small.cpp
printf 'fn main() { let v: Vec<u64> = (1..100).map(|x| x * x).collect(); println!("{}", v.iter().sum::<u64>()); }\n' > hello.rs
cat > py.py <<'EOF'
import json, os, errno, threading, hashlib
d = [{'a': i, 'b': str(i) * 3} for i in range(500)]
print(len(json.loads(json.dumps(d))))
try:
    os.readlink("/")
except OSError as e:
    print(e.errno == errno.EINVAL)
r = []
ts = [threading.Thread(target=lambda i=i: r.append(hashlib.sha256(bytes(i)).hexdigest()[:6])) for i in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]; print(sorted(r))
EOF
py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
cc1=$(gcc -print-prog-name=cc1 2>/dev/null)
cc1plus=$(g++ -print-prog-name=cc1plus 2>/dev/null)
rustc_bin=$(rustc --print sysroot 2>/dev/null)/bin/rustc

# NAME|THREADS (all or caller)|COMMAND (its first word must be installed)
cases="perl|caller|perl -e 'my %h; \$h{\$_ % 97} += \$_ for 1..20000; print join(\",\", map {\$h{\$_}} sort {\$a<=>\$b} keys %h), \"\\n\"'
gzip|caller|gzip -c in.txt
xz|all|xz -c -1 -T2 in.txt
bzip2|caller|bzip2 -c in.txt
zstd|all|zstd -c -q -T2 in.txt
sqlite3|caller|sqlite3 :memory: 'create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c where x < 5000) insert into t select x, x * x % 101 from c; select b, count(*) from t group by b order by 2 desc limit 3;'
grep|caller|grep -c -E 'fn [a-z_]+\\(' in.txt
awk|caller|awk '{n[\$1]++} END {for (k in n) c++; print c, NR}' in.txt
sed|caller|sed -e 's/[aeiou]/_/g' in.txt
sort|all|sort --parallel=2 -S 1M in.txt
jq|caller|jq -c '[.[] | numbers] | add' in.json
tclsh|caller|tclsh t.tcl
node|all|node -e 'let s = 0; for (let i = 0; i < 100000; i++) s += i % 7; console.log(s)'
python|all|${py:-python3} py.py
cc1|caller|${cc1:-cc1} -quiet -O2 small.c -o -
cc1plus|caller|${cc1plus:-cc1plus} -quiet -O1 small.cpp -o -
rustc|all|$rustc_bin --edition 2021 -C opt-level=0 -o hello hello.rs"

failed=0
while IFS='|' read -r name threads cmd; do
  [ "$want" = "  " ] || [[ "$want" == *" $name "* ]] || continue
  first=${cmd%% *}
  command -v "$first" >/dev/null 2>&1 || { printf '%-8s skipped (%s not installed)\n' "$name" "$first"; continue; }
  eval "$cmd" >native.out 2>/dev/null
  native=$?
  start=$(date +%s.%N)
  eval "\"$bin\" record --no-resolve --mode $mode --all --threads $threads -o $name.ccdump -- $cmd" >captured.out 2>captured.err
  captured=$?
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  insns=$(grep -o '^  [0-9]* instructions' captured.err | head -1 | tr -d ' a-z')
  trapped=$(grep -o 'instructions ([0-9.]*%) ran under' captured.err | grep -o '[0-9.]*%' | head -1)
  if [ "$native" = "$captured" ] && cmp -s native.out captured.out; then
    verdict=same
  else
    verdict="DIFFERENT (status $native native, $captured captured)"
    failed=1
    sed 's/^/    /' captured.err | head -5
  fi
  printf '%-8s %-4s %s, %s instructions, %s trapped, %.1f s\n' "$name" "$mode" "$verdict" "${insns:-?}" "${trapped:-0%}" "$wall"
done <<<"$cases"
exit $failed
