#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check-copyright.py [COPYRIGHT]: debian/copyright (machine-readable, DEP-5) parses, and
says for every tracked source file the license its SPDX line names: each Files paragraph has
Copyright and License, each license it names has a stand-alone paragraph with its text, and
the last Files pattern a file matches (DEP-5's rule) gives the file's own SPDX license.
Exit 1 naming what is wrong."""
import fnmatch, re, subprocess, sys, os

def paragraphs(text):
    paras, cur, key = [], {}, None
    for line in text.split('\n') + ['']:
        if not line.strip():
            if cur:
                paras.append(cur)
            cur, key = {}, None
        elif line[0] in ' \t':
            if key is None:
                raise ValueError(f'a continuation line with no field: {line!r}')
            cur[key] += '\n' + line.strip()
        else:
            key, _, value = line.partition(':')
            cur[key] = value.strip()
    return paras

def main():
    if sys.argv[1:2] in (['-h'], ['--help']):
        print(__doc__)
        return 0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, 'debian/copyright')
    errors = []
    paras = paragraphs(open(path, encoding='utf-8').read())
    if not paras or not paras[0].get('Format', '').startswith('https://www.debian.org/doc/packaging-manuals/copyright-format/1.0'):
        errors.append('the first paragraph has no DEP-5 Format line')
    files = [p for p in paras[1:] if 'Files' in p]
    texts = {p['License'].split('\n')[0]: p['License'] for p in paras[1:] if 'Files' not in p and 'License' in p}
    for p in files:
        if 'Copyright' not in p or 'License' not in p:
            errors.append(f"Files: {p['Files']}: needs Copyright and License")
            continue
        name = p['License'].split('\n')[0]
        if '\n' not in p['License'] and '\n' not in texts.get(name, ''):
            errors.append(f"License {name} (Files: {p['Files']}) has no paragraph with its text")
    tracked = subprocess.run(['git', '-C', root, 'ls-files'], capture_output=True, text=True).stdout.split()
    spdx = re.compile(r'SPDX-License-Identifier: ([A-Za-z0-9.+-]+)')
    for f in tracked:
        try:
            head = ''.join(open(os.path.join(root, f), encoding='utf-8', errors='replace').readlines()[:3])
        except (IsADirectoryError, FileNotFoundError):
            continue
        m = spdx.search(head)
        if not m:
            continue
        said = None
        for p in files:
            if any(fnmatch.fnmatchcase(f, pat) for pat in p['Files'].split()):
                said = p.get('License', '').split('\n')[0]
        if said != m.group(1):
            errors.append(f'{f}: its SPDX line says {m.group(1)}, {path} says {said}: '
                          'make the Files paragraphs match COPYING')
    for e in errors:
        print(f'{path}: {e}', file=sys.stderr)
    return 1 if errors else 0

if __name__ == '__main__':
    sys.exit(main())
