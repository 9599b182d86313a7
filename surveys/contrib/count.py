#!/usr/bin/env python3
"""Count uses of tf.contrib.* names in Python sources (stdlib only).

Usage:
    python3 count.py [--include-tests] [--per-file] DIR_OR_LABEL=DIR ...

Each argument is a directory (label = its basename) or LABEL=DIR.  Every
*.py file under it is scanned.  Prints CSV to stdout:

    name,call_sites,files,where

where "where" is "label:call_sites; ..." sorted by count.

Rules (see sources.md for the rationale):
  * comments and string literals are blanked with `tokenize` before matching
    (regex fallback if tokenize fails), so docstrings do not count;
  * test files (test_*.py, *_test.py, *_tests.py, and files under a
    directory called test/tests/testdata) are skipped unless --include-tests;
  * direct references  <tf>.contrib.a.b.C  (tf = any alias bound by
    `import tensorflow as X`, default `tf`) count once each;
  * aliases are resolved per file:
      from tensorflow.contrib import lookup as contrib_lookup
      import tensorflow.contrib.slim as slim
      from tensorflow.contrib.training import HParams
      from tensorflow.contrib.framework.python.ops import variables as v
      slim = tf.contrib.slim          (simple assignment of a contrib path)
    every later use `alias.x.y` / `alias(` / bare `alias` counts once as the
    resolved name; the binding statement itself (import / assignment) is
    NOT counted as a call site;
  * canonical names: everything under tf.contrib.slim (and tensorflow.contrib
    .slim.*, e.g. slim.nets) collapses to the single name `tf.contrib.slim`;
    dotted submodule paths (`tf.contrib.<fam>.python.<mod...>.X`,
    `tf.contrib.layers.summaries.X`) are names of their own, as the program
    wrote them (through aliases too); a dotted chain is cut after its first
    Capitalised segment (tf.contrib.learn.ModeKeys.TRAIN ->
    tf.contrib.learn.ModeKeys); a bare family reference (e.g. passing
    `tf.contrib.layers` around) is reported as `tf.contrib.<fam>`.
"""
import collections
import io
import os
import re
import sys
import tokenize

IDENT = r'[A-Za-z_]\w*'
CHAIN = r'%s(?:\s*\.\s*%s)*' % (IDENT, IDENT)

TEST_FILE_RE = re.compile(r'(^test_.*|.*_test|.*_tests)\.py$')
TEST_DIRS = {'test', 'tests', 'testdata'}


def is_test(path):
    base = os.path.basename(path)
    if TEST_FILE_RE.match(base):
        return True
    parts = set(os.path.normpath(path).split(os.sep)[:-1])
    return bool(parts & TEST_DIRS)


def strip_comments_strings(src):
    """Blank out comments and string literals, keep line/column layout."""
    lines = src.splitlines(True)
    out = [list(l) for l in lines]
    try:
        toks = tokenize.generate_tokens(io.StringIO(src).readline)
        for tok in toks:
            if tok.type in (tokenize.COMMENT, tokenize.STRING):
                (sr, sc), (er, ec) = tok.start, tok.end
                for r in range(sr, er + 1):
                    if r - 1 >= len(out):
                        break
                    row = out[r - 1]
                    c0 = sc if r == sr else 0
                    c1 = ec if r == er else len(row)
                    for c in range(c0, min(c1, len(row))):
                        if row[c] != '\n':
                            row[c] = ' '
                # keep a placeholder so `x = ''` stays syntactically shaped
                if tok.type == tokenize.STRING and sr - 1 < len(out):
                    row = out[sr - 1]
                    if sc + 1 < len(row):
                        row[sc] = '"'
                        row[sc + 1] = '"'
        return ''.join(''.join(r) for r in out)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        # crude fallback: drop '#' comments and triple-quoted blocks
        s = re.sub(r'("""|\'\'\')(?:.|\n)*?\1',
                   lambda m: '""' + '\n' * m.group(0).count('\n'), src)
        s = re.sub(r'#[^\n]*', '', s)
        return s


def canonical(parts):
    """parts: list of segments after 'contrib'. Returns canonical name."""
    parts = [p for p in parts if p]
    if not parts:
        return 'tf.contrib'
    if parts[0] == 'slim':
        return 'tf.contrib.slim'
    # A dotted submodule path (tf.contrib.layers.summaries.X,
    # tf.contrib.framework.python.ops.X) is a name of its own: a program
    # reaches the name through that path, and the path has to resolve.
    out = []
    for seg in parts:
        out.append(seg)
        if seg[:1].isupper():
            break
    return 'tf.contrib.' + '.'.join(out)


def split_chain(s):
    return [p.strip() for p in s.split('.')]


IMPORT_FROM_RE = re.compile(
    r'^[ \t]*from[ \t]+tensorflow\.contrib((?:\.%s)*)[ \t]+import[ \t]+'
    r'(\([^)]*\)|[^\n]*(?:\\\n[^\n]*)*)' % IDENT, re.M)
IMPORT_RE = re.compile(
    r'^[ \t]*import[ \t]+tensorflow\.contrib((?:\.%s)*)(?:[ \t]+as[ \t]+(%s))?'
    % (IDENT, IDENT), re.M)
TF_ALIAS_RE = re.compile(
    r'^[ \t]*import[ \t]+tensorflow(?:\.compat\.v1)?[ \t]+as[ \t]+(%s)' % IDENT,
    re.M)


def internal_module_import(mod_parts, name):
    """`from tensorflow.contrib.<mod_parts> import name` -> target parts.

    The path is kept whole: whether `name` is a module or a symbol, a use
    `name.attr` is the path `<mod_parts>.name.attr`.
    """
    mp = [p for p in mod_parts if p]
    if mp and mp[0] == 'slim':
        return ['slim']
    return mp + [name]


ASSIGNED = set()   # names bound by module-level `NAME = <contrib path>`


def parse_aliases(code, tfnames):
    """Return (aliases dict name->parts, binding spans set of (start,end))."""
    aliases = {}
    spans = []
    for m in IMPORT_FROM_RE.finditer(code):
        mod_parts = split_chain(m.group(1)[1:]) if m.group(1) else []
        body = m.group(2).strip().strip('()').replace('\\\n', ' ')
        for item in body.split(','):
            item = item.strip()
            if not item:
                continue
            mm = re.match(r'(%s)(?:\s+as\s+(%s))?' % (IDENT, IDENT), item)
            if not mm:
                continue
            name, alias = mm.group(1), mm.group(2) or mm.group(1)
            if not mod_parts:
                target = [name]          # from tensorflow.contrib import lookup
            else:
                target = internal_module_import(mod_parts, name)
            aliases[alias] = target
        spans.append((m.start(), m.end()))
    for m in IMPORT_RE.finditer(code):
        mod_parts = split_chain(m.group(1)[1:]) if m.group(1) else []
        if m.group(2):
            mp = mod_parts
            if mp and mp[0] == 'slim':
                mp = ['slim']
            aliases[m.group(2)] = mp
        spans.append((m.start(), m.end()))
    # simple assignments:  NAME = tf.contrib.x.y   (whole statement)
    tfalt = '|'.join(re.escape(t) for t in tfnames)
    assign_re = re.compile(
        r'^(%s)[ \t]*=[ \t]*(?:%s)\.contrib((?:\.%s)*)[ \t]*$'
        % (IDENT, tfalt, IDENT), re.M)
    for m in assign_re.finditer(code):
        aliases[m.group(1)] = split_chain(m.group(2)[1:]) if m.group(2) else []
        spans.append((m.start(), m.end()))
        ASSIGNED.add(m.group(1))
    # alias-to-alias assignments: prefetch_queue = slim.prefetch_queue
    changed = True
    while changed:
        changed = False
        for name in list(aliases):
            a2 = re.compile(r'^(%s)[ \t]*=[ \t]*%s((?:\.%s)*)[ \t]*$'
                            % (IDENT, re.escape(name), IDENT), re.M)
            for m in a2.finditer(code):
                new = m.group(1)
                if new in aliases or new in tfnames:
                    continue
                tail = split_chain(m.group(2)[1:]) if m.group(2) else []
                aliases[new] = aliases[name] + tail
                # the right-hand side `alias.attr` is itself counted as a
                # use of `alias`; later uses of `new` count as well.
                changed = True
    return aliases, spans


def in_spans(pos, spans):
    for s, e in spans:
        if s <= pos < e:
            return True
    return False


def count_file(path):
    with open(path, 'rb') as f:
        raw = f.read()
    src = raw.decode('utf-8', 'replace')
    code = strip_comments_strings(src)
    tfnames = set(TF_ALIAS_RE.findall(code)) | {'tf'}
    ASSIGNED.clear()
    aliases, spans = parse_aliases(code, tfnames)
    assigned = set(ASSIGNED)
    counts = collections.Counter()
    tfalt = '|'.join(re.escape(t) for t in sorted(tfnames))
    # direct references
    direct = re.compile(r'(?<![\w.])(?:%s)\s*\.\s*contrib((?:\s*\.\s*%s)*)'
                        % (tfalt, IDENT))
    for m in direct.finditer(code):
        if in_spans(m.start(), spans):
            continue
        parts = split_chain(m.group(1).replace(' ', '')[1:]) if m.group(1) else []
        counts[canonical(parts)] += 1
    # alias uses
    for alias, target in aliases.items():
        if alias in tfnames:
            continue
        before_total = sum(counts.values())
        use = re.compile(r'(?<![\w.])%s((?:\s*\.\s*%s)*)(?![\w])'
                         % (re.escape(alias), IDENT))
        for m in use.finditer(code):
            if in_spans(m.start(), spans):
                continue
            # skip keyword-argument names / attribute definitions: `alias=`
            if not m.group(1) and re.match(r'\s*=(?!=)', code[m.end():m.end() + 3]):
                continue
            # skip `def alias(` / `class alias`
            before = code[max(0, m.start() - 6):m.start()]
            if re.search(r'(def|class)\s+$', before):
                continue
            tail = split_chain(m.group(1).replace(' ', '')[1:]) if m.group(1) else []
            counts[canonical(target + tail)] += 1
        # a module-level `NAME = tf.contrib.x.y` that is never used later
        # still references the name once: count the binding itself.
        if alias in assigned and sum(counts.values()) == before_total:
            counts[canonical(target)] += 1
    return counts


def iter_py(root):
    if os.path.isfile(root):
        yield root
        return
    for dp, dn, fn in os.walk(root):
        dn.sort()
        for f in sorted(fn):
            if f.endswith('.py'):
                yield os.path.join(dp, f)


def main(argv):
    include_tests = '--include-tests' in argv
    per_file = '--per-file' in argv
    args = [a for a in argv if not a.startswith('--')]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    total = collections.Counter()
    files = collections.defaultdict(set)
    where = collections.defaultdict(collections.Counter)
    for a in args:
        if '=' in a and not os.path.isdir(a):
            label, root = a.split('=', 1)
        else:
            root = a
            label = os.path.basename(os.path.normpath(a))
        for p in iter_py(root):
            rel = os.path.relpath(p, root) if os.path.isdir(root) else p
            if not include_tests and is_test(rel):
                continue
            c = count_file(p)
            for name, n in c.items():
                total[name] += n
                files[name].add(p)
                where[name][label] += n
                if per_file:
                    print('#', name, n, p, file=sys.stderr)
    out = sys.stdout
    out.write('name,call_sites,files,where\n')
    for name, n in sorted(total.items(), key=lambda kv: (-kv[1], kv[0])):
        w = '; '.join('%s:%d' % (l, c) for l, c in
                      sorted(where[name].items(), key=lambda kv: (-kv[1], kv[0])))
        out.write('%s,%d,%d,"%s"\n' % (name, n, len(files[name]), w))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
