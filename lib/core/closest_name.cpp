#include "core/closest_name.h"

#include <algorithm>

namespace prophet {

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);  // distances from a's first i characters to each prefix of b
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string closest_name(const std::string& name, const std::vector<std::string>& names) {
    std::string best;
    size_t best_distance = std::max<size_t>(3, name.size() / 3) + 1;
    for (const std::string& known : names) {
        const size_t distance = edit_distance(name, known);
        if (distance < best_distance) {
            best_distance = distance;
            best = known;
        }
    }
    return best;
}

}  // namespace prophet
