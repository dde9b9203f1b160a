//! "Did you mean …?" suggestions for misspelt keys, values and names.

/// Edit distance between two short strings (by chars), counting an
/// insertion, a deletion, a substitution or a swap of neighbours as one edit
/// (optimal string alignment distance).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

/// The candidate closest to `word` if it is close enough to be a likely
/// misspelling (ignoring case and `-` versus `_`).
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    closest_n(word, candidates.iter().copied(), 1).pop()
}

/// Up to `n` distinct candidates close enough to `word` to be likely
/// misspellings (as [`closest`] measures), closest first, ties in the
/// candidates' order.
pub fn closest_n<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let w = norm(word);
    let max = match w.chars().count() {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    };
    let wlen = w.chars().count();
    let mut close: Vec<(usize, &str)> = candidates
        .into_iter()
        // Length alone rules most out before the quadratic distance.
        .filter(|c| c.chars().count().abs_diff(wlen) <= max)
        .map(|c| (distance(&w, &norm(c)), c))
        .filter(|&(d, _)| d <= max)
        .collect();
    close.sort_by_key(|&(d, _)| d);
    let mut out: Vec<&str> = Vec::new();
    for (_, c) in close {
        if out.len() == n {
            break;
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(distance("asoc", "assoc"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("lur", "lru"), 1);
        assert_eq!(closest("lur", &["lru", "fifo"]), Some("lru"));
        let keys = ["name", "assoc", "shared_by", "classify_misses"];
        assert_eq!(closest("asoc", &keys), Some("assoc"));
        assert_eq!(closest("shared-by", &keys), Some("shared_by"));
        assert_eq!(closest("classify-miss", &keys), Some("classify_misses"));
        assert_eq!(closest("zzz", &keys), None);
        assert_eq!(closest("zen5", &["zen4", "jaguar"]), Some("zen4"));
        assert_eq!(
            closest_n(
                "count_and_srot",
                [
                    "count_and_sort",
                    "cmp",
                    "count_and_sort",
                    "count_or_sort",
                    "count_and_sorts"
                ],
                3
            ),
            ["count_and_sort", "count_and_sorts"]
        );
    }
}
