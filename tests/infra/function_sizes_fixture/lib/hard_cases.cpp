// Fixture for ci/function_sizes.py (tests/infra/check_function_sizes.py): each function's expected length is
// in check_function_sizes.py's EXPECTED table; the braces in comments { and strings must not count.
#include <string>
#define OPEN_BRACE {
#define MULTI_LINE(x) \
    do {              \
    } while (0)

namespace fixture {
namespace {

/* a block comment with a brace {
   spanning lines } } */
int plain(int a) {
    return a + 1;
}

const char* strings() {
    const char* s = "{ not a brace \" still a string {";
    char c = '{';
    char q = '\'';
    return c == q ? s : "}";
}

std::string raw() {
    return R"delim(
{ a raw string } with "quotes" and )" inside
)delim";
}

long separators() {
    long big = 1'000'000;
    return big + 0x1'0000;
}

}  // namespace

int table[] = {1, 2, 3};

struct Point {
    int x{0};
    int y = 0;
    int sum() const { return x + y; }
    Point(int a, int b) : x{a}, y(b) {
        x += 0;
    }
};

class Widget : public Point {
public:
    Widget() : Point{1, 2} {}
    bool operator==(const Widget& other) const {
        return sum() == other.sum();
    }
    enum class Kind : int { a = 1, b = 2 };
};

template <typename T, int N = 3>
T templated(T value,
            int scale = {}) {
    auto lambda = [&](int k) {
        return value * k;
    };
    struct Local {
        int f() { return 1; }
    };
    return lambda(scale + N) + Local{}.f();
}

auto trailing(int a) -> int {
    return a;
}

extern "C" {
int c_linkage(void) {
    return 0;
}
}

}  // namespace fixture
