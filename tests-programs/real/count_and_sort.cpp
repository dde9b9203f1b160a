// A word count as people write it: std::unordered_map + std::sort over
// generated words. Built with g++ -O2 -g, `count_and_sort` gets a GCC
// `.cold` part (the block calling the cold `reject` on a bad word, and the
// throw on a bad limit), so `coldcache record --function count_and_sort`
// must find the function by its plain name and count the cold part's
// instructions in the call (crates/cli/tests/workflow.rs compares with
// `valgrind --tool=callgrind --toggle-collect='count_and_sort*'`).
//
// Usage: count_and_sort [WORDS]   (default 20000; every 997th word is bad)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

static unsigned long rejected;

// Cold: the block that calls it is moved to `count_and_sort.cold`.
__attribute__((cold, noinline)) static void reject(const std::string &w) {
    rejected += w.size();
}

__attribute__((noinline)) unsigned long
count_and_sort(const std::vector<std::string> &words, std::size_t limit) {
    if (words.size() > limit)
        throw std::length_error("too many words");
    std::unordered_map<std::string, unsigned> counts;
    for (const std::string &w : words) {
        if (w.empty() || w[0] == '#') {
            reject(w);
            continue;
        }
        ++counts[w];
    }
    std::vector<std::pair<std::string, unsigned>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    unsigned long sum = 0;
    for (std::size_t i = 0; i < sorted.size(); ++i)
        sum = sum * 31 + sorted[i].second * (i + 1) + sorted[i].first.size();
    return sum;
}

int main(int argc, char **argv) {
    std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 20000;
    std::vector<std::string> words;
    words.reserve(n);
    unsigned x = 12345;
    for (std::size_t i = 0; i < n; ++i) {
        x = x * 1103515245u + 12345u;
        std::string w(3 + (x >> 28) % 6, 'a');
        for (char &c : w) {
            x = x * 1103515245u + 12345u;
            c = static_cast<char>('a' + (x >> 24) % 7);
        }
        if (i % 997 == 0)
            w[0] = '#';
        words.push_back(std::move(w));
    }
    unsigned long sum = count_and_sort(words, n);
    std::printf("%lu %lu\n", sum, rejected);
    return 0;
}
