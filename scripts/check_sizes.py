#!/usr/bin/env python3
"""Lists product C++ files over 600 lines and functions over 80 lines.

CONTRIBUTING.md asks for files readable in one sitting and short
functions. This lists what breaks either rule in product code: the C++
files git tracks, less tests (tests/, testing/, fuzzers, *_test.cc and
test helpers) and eval/. Exit status 1 when something is listed.

    scripts/check_sizes.py [--max-file-lines N] [--max-function-lines N] [PATH...]

A function's length is counted from the line of its opening brace to the
line of its closing brace, both included (its signature is not counted).

Limits of the heuristic (it matches braces; it does not parse C++):
  - Comments, string, character and raw string literals and preprocessor
    lines are skipped; a brace produced by a macro is not seen.
  - A brace opens a function body when it is at namespace or class level
    and the text before it, back to the previous ';' or brace, ends with
    ')', a qualifier (const, noexcept, override, final, mutable), a
    trailing return type, or a constructor's initializer list. A lambda
    assigned at namespace level counts as a function; lambdas inside a
    function count towards that function.
  - namespace, class, struct, union, enum and extern "C" blocks are
    scopes; a declaration that names one of these keywords inside
    parentheses (void f(struct stat* s) {) is still seen as a function.
  - Code between #if and #else is read twice over, as if both branches
    were there: a brace opened in each branch misleads the count.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

SOURCE_SUFFIXES = (".cc", ".h")
EXCLUDED_DIRS = ("tests/", "testing/", "eval/", "fuzz/")
EXCLUDED_NAME = re.compile(r"(_test|_fuzz|_fuzzer|_test_support|test_fixtures|test_support)\.(cc|h)$")

SCOPE_HEADER = re.compile(r'\b(namespace|class|struct|union|enum)\b|^\s*extern\s*"\s*"\s*$')
QUALIFIERS = r"(\s*(const|noexcept|override|final|mutable|volatile|&&|&|noexcept\s*\([^()]*\)))*"
FUNCTION_HEADER = re.compile(r"\)" + QUALIFIERS + r"(\s*->\s*[\w:<>,\s\*&]+)?\s*$")
INIT_LIST_HEADER = re.compile(r"\)" + QUALIFIERS + r"\s*:\s*[\w:]+\s*[({].*[)}]\s*$", re.S)
NAME_BEFORE_PAREN = re.compile(r"(operator\s*[^\s(]+|~?[A-Za-z_][\w:~]*)\s*(<[^()]*>)?\s*\($")


def product_files(paths):
    listed = subprocess.run(["git", "ls-files", "--", *paths], capture_output=True, text=True,
                            check=True).stdout.split()
    for name in listed:
        if not name.endswith(SOURCE_SUFFIXES):
            continue
        if any(name.startswith(d) or f"/{d}" in name for d in EXCLUDED_DIRS):
            continue
        if EXCLUDED_NAME.search(name):
            continue
        yield name


def strip_code(text):
    """The text with comments, literals and preprocessor lines blanked out,
    newlines kept so that offsets map to the same lines."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor line, with its backslash continuations.
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
            continue
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
            continue
        raw = re.match(r'R"([^()\\\s]{0,16})\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + "".join(ch if ch == "\n" else " " for ch in text[i + 2:end]))
            i = end
            continue
        if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
            out.append(" ")  # digit separator: 1'000
            i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def function_name(header):
    depth = 0
    for k, ch in enumerate(header):
        if ch == "(":
            if depth == 0:
                match = NAME_BEFORE_PAREN.search(header[:k + 1])
                if match:
                    return match.group(1)
                if header[:k].rstrip().endswith("]"):
                    return "(lambda)"
            depth += 1
        elif ch == ")":
            depth -= 1
    return "(unnamed)"


def long_functions(code, limit):
    """(line, name, lines) of each function body longer than `limit` lines."""
    found = []
    stack = []  # per open brace: "scope", "function" or "other"
    header_start = 0
    line_of = lambda offset: code.count("\n", 0, offset) + 1
    function_open = None
    for i, ch in enumerate(code):
        if ch == ";" and all(kind == "scope" for kind in stack):
            header_start = i + 1
        elif ch == "{":
            if all(kind == "scope" for kind in stack):
                header = " ".join(code[header_start:i].split())
                if SCOPE_HEADER.search(header) and "(" not in header:
                    stack.append("scope")
                    header_start = i + 1
                elif FUNCTION_HEADER.search(header) or INIT_LIST_HEADER.search(header):
                    stack.append("function")
                    function_open = (i, function_name(header))
                else:
                    stack.append("other")  # an initializer, kept in the header
            else:
                stack.append("other")
        elif ch == "}" and stack:
            kind = stack.pop()
            if kind == "function" and all(k == "scope" for k in stack):
                first = line_of(function_open[0])
                lines = line_of(i) - first + 1
                if lines > limit:
                    found.append((first, function_open[1], lines))
                header_start = i + 1
            elif kind == "scope":
                header_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-file-lines", type=int, default=600)
    parser.add_argument("--max-function-lines", type=int, default=80)
    parser.add_argument("paths", nargs="*", help="files or folders (default: the whole tree)")
    args = parser.parse_args()
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                               text=True, check=True).stdout.strip())
    # git ls-files names files from where it runs: from the root, so that
    # the exclusions above match.
    paths = [str(Path(p).resolve().relative_to(root)) for p in args.paths]
    os.chdir(root)
    listed = 0
    for name in product_files(paths):
        text = (root / name).read_text(errors="replace")
        lines = text.count("\n")
        if lines > args.max_file_lines:
            print(f"{name}: {lines} lines (> {args.max_file_lines})")
            listed += 1
        for line, function, length in long_functions(strip_code(text), args.max_function_lines):
            print(f"{name}:{line}: {function} is {length} lines (> {args.max_function_lines})")
            listed += 1
    return 1 if listed else 0


if __name__ == "__main__":
    sys.exit(main())
