#!/usr/bin/python3
"""Counts the length of every function defined in the C++/CUDA sources under lib/ and cmd/, and gates it in CI.

A function's length is its lines from the first line of its signature to its closing brace, both included.
The scanner is a brace matcher that skips comments, string, character and raw-string literals and preprocessor
lines, and tells a function body from a namespace, class, enum or initializer brace by the text before it;
lambdas and local classes count toward the function around them. tests/infra/check_function_sizes.py runs it
on a fixture of the hard cases (tests/infra/function_sizes_fixture/).

Rules (issue 27; CONVENTIONS: functions <= ~60 lines, never a new one over 80):
  over 100   every function over 100 lines must be in the allowlist (today's offenders, each to be split)
  over 60    the number of functions over 60 lines may not rise above the allowlist's recorded number
             (a ratchet: lower it as functions are split; --update rewrites it)

Usage:
  function_sizes.py [--root DIR] [--allow FILE]            the functions over 60 and 100 lines; exit 1 on a breach
  function_sizes.py --update [--root DIR] [--allow FILE]   rewrite the allowlist from the tree as it is
  function_sizes.py --list [--root DIR] [PATH...]          every function: length, file:line, name (tab-separated)
Exit codes: 0 ok, 1 a rule is broken, 2 usage or an unreadable file.
"""
import argparse
import os
import re
import sys

SOURCE_DIRS = ("lib", "cmd")
EXTENSIONS = (".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh")
SOFT, HARD = 60, 100
DEFAULT_ALLOW = "ci/function_sizes_allow.txt"
RAW_PREFIX = re.compile(r"(?:u8|u|U|L)?R$")
RAW_DELIMITER = re.compile(r'"([^()\\\s]{0,16})\(')


def _is_ident(ch):
    return ch.isalnum() or ch == "_"


def _directive_end(text, i):
    """offset of the newline ending the preprocessor directive at i (backslash-newlines continue it)"""
    n = len(text)
    while i < n and text[i] != "\n":
        if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            i += 1
    return i


def _quoted_end(text, i, quote):
    """offset just past the literal opened by the quote at i (an unterminated one ends at the line's end)"""
    n = len(text)
    j = i + 1
    while j < n and text[j] != quote and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, n)


def _raw_string_end(text, i):
    """offset just past a raw string literal whose quote is at i, or None when the quote does not open one"""
    m = RAW_PREFIX.search(text, max(0, i - 3), i)
    if not m or (m.start() > 0 and _is_ident(text[m.start() - 1])):
        return None
    d = RAW_DELIMITER.match(text, i)
    if not d:
        return None
    end = text.find(")" + d.group(1) + '"', d.end())
    return len(text) if end < 0 else end + len(d.group(1)) + 2


def _is_digit_separator(text, i):
    """the quote at i sits inside a number (1'000'000): the token before it starts with a digit"""
    k = i - 1
    while k >= 0 and (_is_ident(text[k]) or text[k] in "'."):
        k -= 1
    return i > 0 and _is_ident(text[i - 1]) and text[k + 1].isdigit()


def blank_literals(text):
    """text with comments, string/char/raw-string literals and preprocessor lines turned into spaces; newlines
    stay, so an offset keeps its line"""
    out = list(text)
    n, i = len(text), 0
    line_start = True  # only whitespace since the last newline: a '#' here opens a directive

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
        return b

    while i < n:
        c = text[i]
        if c == "\n":
            line_start, i = True, i + 1
        elif c.isspace():
            i += 1
        elif line_start and c == "#":
            i = blank(i, _directive_end(text, i))
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = blank(i, n if end < 0 else end)
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = blank(i, n if end < 0 else end + 2)
        elif c == '"':
            raw_end = _raw_string_end(text, i)
            i = blank(i, raw_end if raw_end is not None else _quoted_end(text, i, '"'))
        elif c == "'" and not _is_digit_separator(text, i):
            i = blank(i, _quoted_end(text, i, "'"))
        else:
            i += 1
        if c != "\n" and not c.isspace():
            line_start = False
    return "".join(out)


def strip_template_prefix(header):
    """header without its leading 'template <...>' clauses"""
    while True:
        m = re.match(r"\s*template\s*<", header)
        if not m:
            return header
        depth, j = 1, m.end()
        while j < len(header) and depth:
            depth += {"<": 1, ">": -1}.get(header[j], 0)
            j += 1
        header = header[j:]


def outside_parens(header):
    """header without whatever sits inside () and []"""
    out, depth = [], 0
    for ch in header:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def strip_access(header):
    """header without leading access specifiers (public: ...)"""
    return re.sub(r"^(\s*(public|private|protected)\s*:(?!:))+", "", header)


FUNCTION_END = re.compile(r"(\)|\}|\b(const|noexcept|override|final|mutable)|->\s*[\w:<>,\s*&]+|noexcept\s*\(.*\))\s*$",
                          re.S)


def classify(header):
    """what a '{' opened at namespace or class scope is, from the declaration text before it: 'namespace',
    'class', 'function', 'inner' (a brace inside the declaration: a default argument's or a constructor's
    braced member initializer) or 'other' (an initializer, an enum's body seen as data, ...)"""
    h = strip_template_prefix(strip_access(header)).strip()
    if h.count("(") > h.count(")"):
        return "inner"  # void f(Foo x = {}) : inside the parameter list
    if re.match(r"(inline\s+)?namespace\b", h) or re.fullmatch(r"extern\s*", h):
        return "namespace"
    is_operator = re.search(r"\boperator\b", h) is not None
    top = outside_parens(h)
    if not is_operator and re.search(r"(?<![=!<>])=(?!=)", top):
        return "other"  # int table[] = {...}; auto f = [](...) {...}
    if re.match(r"((typedef|static|const|constexpr|inline|extern)\s+)*(class|struct|union|enum)\b", h) and \
            not re.search(r"\)\s*$", h):
        return "class"
    if "(" not in h:
        return "other"
    if re.search(r"\)[\s\w]*:(?!:)", h) and re.search(r"[\w>]\s*$", h) and not FUNCTION_END.search(h):
        return "inner"  # Foo::Foo(int a) : x_{a}  -- a member's braced initializer
    return "function" if FUNCTION_END.search(h) else "other"


def function_name(header):
    h = strip_template_prefix(strip_access(header))
    m = re.search(r"\boperator\b\s*(\(\)|[^(\s]+)", h)
    if m:
        return re.search(r"((?:[\w~]+::)*)\s*$", h[:m.start()]).group(1) + "operator" + m.group(1)
    depth = 0
    for k, ch in enumerate(h):  # the first '(' outside <...>: the parameter list
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "(" and depth <= 0:
            m = re.search(r"((?:::)?(?:[\w~]+(?:<[^<>()]*>)?::)*[\w~]+(?:<[^()]*>)?)\s*$", h[:k])
            return re.sub(r"\s+", "", m.group(1)) if m else "?"
    return "?"


def scan(text):
    """[(name, first_line, last_line)] of every function body in text, 1-based lines, in order of their end"""
    clean = blank_literals(text)
    functions = []
    stack = []  # per open brace: (kind, name, first line)
    header_start = 0  # where the current declaration's text began
    nested = 0  # open braces inside a function, an initializer or a declaration
    for i, ch in enumerate(clean):
        if ch not in "{};":
            continue
        if nested:
            if ch == "{":
                nested += 1
                stack.append(("other", None, None))
            elif ch == "}":
                nested -= 1
                kind, name, first = stack.pop()
                if kind == "function":
                    functions.append((name, first, clean.count("\n", 0, i) + 1))
                if kind != "inner":
                    header_start = i + 1
            continue
        if ch == ";" or ch == "}":
            if ch == "}" and stack:
                stack.pop()
            header_start = i + 1
            continue
        header = clean[header_start:i]
        kind = classify(header)
        name, first = None, None
        if kind == "function":
            body = strip_access(header)
            start = header_start + len(header) - len(body) + len(body) - len(body.lstrip())
            name, first = function_name(header), clean.count("\n", 0, start) + 1
        stack.append((kind, name, first))
        if kind in ("namespace", "class"):
            header_start = i + 1
        else:
            nested += 1
    return functions


def source_files(root):
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith(EXTENSIONS):
                    yield os.path.join(dirpath, f)


def measure(root, paths=None):
    """[(length, path relative to root, first line, name)] of every function, longest first"""
    result = []
    for path in paths or list(source_files(root)):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"function_sizes: cannot read '{path}': {e.strerror}", file=sys.stderr)
            sys.exit(2)
        rel = os.path.relpath(path, root)
        for name, first, last in scan(text):
            result.append((last - first + 1, rel, first, name))
    return sorted(result, key=lambda r: (-r[0], r[1], r[2]))


def read_allow(path):
    """(allowed 'path name' keys, recorded count over 60); the file: '# comments', 'over_60 N', 'allow PATH NAME'"""
    allowed, over_soft = set(), None
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        print(f"function_sizes: cannot read the allowlist '{path}': {e.strerror}", file=sys.stderr)
        sys.exit(2)
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] == "over_60" and len(words) == 2 and words[1].isdigit():
            over_soft = int(words[1])
        elif words[0] == "allow" and len(words) >= 3:
            allowed.add(f"{words[1]} {words[2]}")
        else:
            print(f"function_sizes: {path}:{number}: '{line}' is neither 'over_60 N' nor 'allow PATH NAME [LINES]'",
                  file=sys.stderr)
            sys.exit(2)
    if over_soft is None:
        print(f"function_sizes: {path} records no 'over_60 N' line", file=sys.stderr)
        sys.exit(2)
    return allowed, over_soft


def write_allow(path, functions):
    hard = [f for f in functions if f[0] > HARD]
    soft = [f for f in functions if f[0] > SOFT]
    with open(path, "w") as out:
        out.write("# ci/function_sizes.py's allowlist (issue 27): functions over 100 lines that exist today, each to\n"
                  "# be split into named steps and then removed from here, and the ratchet on the number over 60\n"
                  "# lines (lower it as functions are split; never raise it). Regenerate: ci/function_sizes.py --update\n")
        out.write(f"over_60 {len(soft)}\n")
        for length, rel, _, name in sorted(hard, key=lambda r: (r[1], r[3])):
            out.write(f"allow {rel} {name} {length}\n")


def report(functions, allowed, over_soft):
    """prints the functions over 60 and 100 lines and every broken rule; returns the number broken"""
    soft = [f for f in functions if f[0] > SOFT]
    for length, rel, line, name in soft:
        mark = "over 100" if length > HARD else "over 60"
        print(f"{length:5d}  {mark:8s}  {rel}:{line}  {name}")
    broken = 0
    for length, rel, line, name in soft:
        if length > HARD and f"{rel} {name}" not in allowed:
            print(f"function_sizes: {rel}:{line} {name} is {length} lines (> {HARD}) and not in the allowlist: "
                  f"split it into named steps")
            broken += 1
    stale = sorted(allowed - {f"{rel} {name}" for length, rel, _, name in soft if length > HARD})
    for key in stale:
        print(f"function_sizes: note: '{key}' is no longer over {HARD} lines (or gone): drop it from the allowlist")
    if len(soft) < over_soft:
        print(f"function_sizes: note: {len(soft)} functions over {SOFT} lines, below the ratchet's {over_soft}: "
              f"lower it (ci/function_sizes.py --update)")
    if len(soft) > over_soft:
        print(f"function_sizes: {len(soft)} functions over {SOFT} lines, the recorded ratchet allows {over_soft}: "
              f"split the new ones (or lower nothing: the number only goes down)")
        broken += 1
    print(f"function_sizes: {len(functions)} functions, {len(soft)} over {SOFT} lines (ratchet {over_soft}), "
          f"{sum(1 for f in soft if f[0] > HARD)} over {HARD}; {broken} rule(s) broken")
    return broken


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    p.add_argument("--allow", help=f"the allowlist (default ROOT/{DEFAULT_ALLOW})")
    p.add_argument("--update", action="store_true", help="rewrite the allowlist from the tree as it is")
    p.add_argument("--list", action="store_true", help="print every function found")
    p.add_argument("paths", nargs="*", help="with --list: these files instead of lib/ and cmd/")
    args = p.parse_args(argv)
    if args.paths and not args.list:
        p.error("file arguments go with --list")
    root = os.path.abspath(args.root)
    allow = args.allow or os.path.join(root, DEFAULT_ALLOW)
    functions = measure(root, args.paths or None)
    if args.list:
        for length, rel, line, name in functions:
            print(f"{length}\t{rel}:{line}\t{name}")
        return 0
    if args.update:
        write_allow(allow, functions)
        print(f"function_sizes: wrote {allow}")
        return 0
    allowed, over_soft = read_allow(allow)
    return 1 if report(functions, allowed, over_soft) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
