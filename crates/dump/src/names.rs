//! Function names as people type them: one matcher for `record --function`
//! (over symbol tables, `coldcache_symbols::functions`) and for the views
//! that take a function name (`report --view annotate`, `--callers`, over
//! a dump's names). Pure string logic.
//!
//! A query matches a function's demangled name in tiers; the first tier
//! with a match decides ([`NameMatch`]): the name itself, the name without
//! its parameter list or return type (`geo::Vec2::dot`), its end on a `::`
//! boundary (`Vec2::dot`), a wildcard pattern (`count_and_sort*`).

/// The name without its parameter list (and what follows it: `const`, a
/// return type): `geo::Vec2::dot(geo::Vec2 const&) const` → `geo::Vec2::dot`.
/// Parentheses inside template arguments or lambda names, of
/// `(anonymous namespace)` and of `operator()` are not the list.
pub fn without_parameters(name: &str) -> &str {
    let b = name.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'<' | b'{' | b'[' => depth += 1,
            b'>' | b'}' | b']' => depth -= 1,
            b'(' if depth == 0 => {
                let rest = &name[i..];
                if rest.starts_with("(anonymous namespace)") {
                    i += "(anonymous namespace)".len();
                    continue;
                }
                if name[..i].ends_with("operator") && rest.starts_with("()") {
                    i += 2;
                    continue;
                }
                if i > 0 {
                    return &name[..i];
                }
            }
            _ => {}
        }
        // `operator<`, `operator<<`, `operator->`, `operator>=`…: their
        // brackets are not template brackets.
        if name[..=i].ends_with("operator") {
            let ops = name[i + 1..]
                .bytes()
                .take_while(|c| b"<>=-".contains(c))
                .count();
            i += ops;
        }
        i += 1;
    }
    name
}

/// The name without the return type a template function's demangled name
/// starts with: `int geo::total<int>` → `geo::total<int>` (the part after
/// the last space outside brackets).
pub fn without_return_type(name: &str) -> &str {
    let mut depth = 0i32;
    let mut cut = 0;
    for (i, c) in name.char_indices() {
        match c {
            '<' | '(' | '{' | '[' => depth += 1,
            '>' | ')' | '}' | ']' => depth -= 1,
            ' ' if depth == 0 => cut = i + 1,
            _ => {}
        }
    }
    &name[cut..]
}

/// Whether `text` matches `pattern`, where `*` is any run of characters
/// (none included) and `?` is one character.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// How a function's demangled name matches a query, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NameMatch {
    /// The name itself.
    Exact,
    /// The name without its parameters (and return type).
    Bare,
    /// The end of the bare name on a `::` boundary.
    Suffix,
    /// A wildcard pattern over the name or its bare form.
    Wildcard,
}

/// How the demangled `name` matches `query`, if it does.
pub fn match_name(name: &str, query: &str) -> Option<NameMatch> {
    if name == query {
        return Some(NameMatch::Exact);
    }
    let base = without_parameters(name);
    let bare = without_return_type(base);
    if base == query || bare == query {
        return Some(NameMatch::Bare);
    }
    if bare
        .strip_suffix(query)
        .is_some_and(|head| head.ends_with("::"))
    {
        return Some(NameMatch::Suffix);
    }
    if query.contains(['*', '?']) && [name, base, bare].iter().any(|t| wildcard_match(query, t)) {
        return Some(NameMatch::Wildcard);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_from_the_most_literal() {
        let f = "void geo::total<int>(std::vector<int, std::allocator<int> > const&)";
        assert_eq!(match_name(f, f), Some(NameMatch::Exact));
        assert_eq!(match_name(f, "geo::total<int>"), Some(NameMatch::Bare));
        assert_eq!(match_name(f, "total<int>"), Some(NameMatch::Suffix));
        assert_eq!(match_name(f, "geo::total*"), Some(NameMatch::Wildcard));
        assert_eq!(match_name(f, "otal<int>"), None);
        assert_eq!(
            match_name("count_and_sort", "count_and_sort"),
            Some(NameMatch::Exact)
        );
        assert_eq!(
            match_name(
                "std::__introsort_loop<int*>(int*, int*, long)",
                "count_and_sort"
            ),
            None
        );
    }
}
