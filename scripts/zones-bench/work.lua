-- Workload for scripts/zones-bench.sh: calls, table traffic, strings.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 200000 do t[i] = tostring(i) .. "x" end
table.sort(t)
local s = 0
for i = 1, #t, 7 do s = s + #t[i] end
print(fib(24), s)
