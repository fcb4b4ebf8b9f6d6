"""The front door stays current: line budgets, links that resolve, modes that exist.

README.md and docs/benchmarks.md have line budgets: a new result of an
experiment replaces the old one there, and the history goes to
docs/notebook.md. Every relative link and image in README.md, docs/*.md and
benchmarks/README.md must name a file of the repository, and a link's
``#anchor`` into a Markdown file must name one of its headings as GitHub
spells them. The ``gpu_session.sh MODE`` commands of README.md and
docs/benchmarks.md must name modes the script has.

These tests read the checkout; from an installed wheel's test copy (``make
wheel-test``), where README.md and docs/ are not next to tests/, they skip.
"""

import collections
import os
import re
import tempfile
import unittest
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_CHECKOUT = (os.path.isfile(os.path.join(REPO, "README.md"))
               and os.path.isdir(os.path.join(REPO, "docs")))

# The most lines each front-door file may have.
LINE_BUDGETS = {"README.md": 180, "docs/benchmarks.md": 600}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# [text](target) and ![alt](target); the target may be <in angle brackets> and
# may carry a "title". Text may hold one level of nested brackets (an image
# inside a link).
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+\"[^\"]*\")?\s*\)")
_HTML_SRC = re.compile(r"<(?:img|a)\s[^>]*?(?:src|href)=\"([^\"]+)\"", re.IGNORECASE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# `bash benchmarks/gpu_session.sh MODE ...` in the docs; the script's modes are
# the labels of its case statement.
_SESSION_MODE = re.compile(r"gpu_session\.sh\s+([a-z0-9_]+)")  # MODE: a placeholder
_CASE_LABEL = re.compile(r"(?m)^\s+([A-Za-z0-9_]+)\)")


def _doc_files():
    """The Markdown files whose links are checked, relative to the repository."""
    files = ["README.md", "benchmarks/README.md"]
    docs = os.path.join(REPO, "docs")
    files += sorted("docs/" + name for name in os.listdir(docs) if name.endswith(".md"))
    return [f for f in files if os.path.isfile(os.path.join(REPO, f))]


def _prose_lines(text):
    """Yields (line number, line) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        yield number, line


def _targets(text):
    """Yields (line number, link target) of the Markdown links and images outside code."""
    for number, line in _prose_lines(text):
        line = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        for match in _LINK.finditer(line):
            yield number, match.group(1).strip("<>")
        for match in _HTML_SRC.finditer(line):
            yield number, match.group(1)


def github_slug(heading):
    """The anchor GitHub gives a heading: rendered text, lower case, punctuation dropped.

    Args:
      heading: the heading's Markdown, without its leading #s.

    Returns:
      The slug, before the "-1", "-2" that GitHub appends to repeats.
    """
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def anchors(text):
    """The anchors of a Markdown file's headings (outside code), repeats numbered as GitHub does."""
    seen = collections.Counter()
    result = set()
    for _, line in _prose_lines(text):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        result.add(slug if seen[slug] == 0 else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return result


def broken_links(path, root=REPO):
    """The relative links of one Markdown file that name no file or no heading.

    Args:
      path: the Markdown file, absolute or relative to root.
      root: the folder that the messages' file names are relative to.

    Returns:
      A list of "FILE:LINE: TARGET (why)" strings, empty when all resolve.
    """
    path = os.path.join(root, path)
    relative_path = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    broken = []
    for number, target in _targets(text):
        parsed = urllib.parse.urlsplit(target)
        if parsed.scheme or target.startswith("//"):
            continue  # http(s), mailto: not this repository's files
        file_part = urllib.parse.unquote(parsed.path)
        where = f"{relative_path}:{number}: {target}"
        if file_part:
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(resolved):
                broken.append(f"{where} (no such file)")
                continue
        else:
            resolved = path
        if parsed.fragment and resolved.endswith(".md"):
            with open(resolved, encoding="utf-8") as f:
                if urllib.parse.unquote(parsed.fragment) not in anchors(f.read()):
                    broken.append(f"{where} (no heading with this anchor in "
                                  f"{os.path.relpath(resolved, root)})")
    return broken


@unittest.skipUnless(IN_CHECKOUT, "README.md and docs/ are not next to tests/ (e.g. the "
                     "installed wheel's test copy): the docs are checked in the checkout only")
class FrontDoorTest(unittest.TestCase):

    def test_line_budgets(self):
        over = []
        for name, budget in LINE_BUDGETS.items():
            with open(os.path.join(REPO, name), encoding="utf-8") as f:
                lines = len(f.read().splitlines())
            if lines > budget:
                over.append(f"{name}: {lines} lines, budget {budget} (move superseded results "
                            "to docs/notebook.md)")
        if over:
            self.fail("\n" + "\n".join(over))

    def test_relative_links_and_images_resolve(self):
        files = _doc_files()
        self.assertIn("README.md", files)
        self.assertIn("docs/benchmarks.md", files)
        broken = [b for name in files for b in broken_links(name)]
        if broken:
            self.fail(f"{len(broken)} broken links:\n" + "\n".join(broken))


    def test_gpu_session_modes_named_by_the_front_door_exist(self):
        with open(os.path.join(REPO, "benchmarks", "gpu_session.sh"), encoding="utf-8") as f:
            modes = set(_CASE_LABEL.findall(f.read()))
        self.assertIn("memory_cap_gpus", modes)
        missing = []
        for name in ("README.md", "docs/benchmarks.md"):
            with open(os.path.join(REPO, name), encoding="utf-8") as f:
                text = " ".join(f.read().split())  # commands wrap across lines
            missing += [f"{name}: gpu_session.sh {mode}" for mode in _SESSION_MODE.findall(text)
                        if mode not in modes]
        if missing:
            self.fail("modes that benchmarks/gpu_session.sh does not have:\n" + "\n".join(missing))


class GithubSlugTest(unittest.TestCase):
    """The anchors checked above are GitHub's."""

    def test_numbered_heading_with_code_and_punctuation(self):
        self.assertEqual(github_slug("8. Main job (`make run`)"), "8-main-job-make-run")
        self.assertEqual(github_slug("2. The DeepBench layers below 0.97x"),
                         "2-the-deepbench-layers-below-097x")
        self.assertEqual(github_slug("11. A new batch size, and plans from process to process"),
                         "11-a-new-batch-size-and-plans-from-process-to-process")

    def test_link_text_kept_and_repeats_numbered(self):
        self.assertEqual(github_slug("See [the design](docs/design.md)"), "see-the-design")
        text = "# A\n\n```sh\n# not a heading\n```\n\n## A\n### B_c\n"
        self.assertEqual(anchors(text), {"a", "a-1", "b_c"})

    def test_missing_files_and_anchors_are_reported_with_their_lines(self):
        with tempfile.TemporaryDirectory() as root:
            os.mkdir(os.path.join(root, "docs"))
            with open(os.path.join(root, "docs", "b.md"), "w", encoding="utf-8") as f:
                f.write("# B\n\n## 1. Under a cap\n")
            with open(os.path.join(root, "a.md"), "w", encoding="utf-8") as f:
                f.write("# A\n[ok](docs/b.md#1-under-a-cap) [top](#a) [web](https://x.org/y)\n"
                        "![fig](docs/fig.png)\n[anchor](docs/b.md#2-gone) [self](#nowhere)\n")
            self.assertEqual(broken_links("a.md", root), [
                "a.md:3: docs/fig.png (no such file)",
                "a.md:4: docs/b.md#2-gone (no heading with this anchor in docs/b.md)",
                "a.md:4: #nowhere (no heading with this anchor in a.md)",
            ])

    def test_links_in_code_are_not_links(self):
        text = "[x](missing.md) `[y](also_missing.md)`\n```\n[z](gone.md)\n```\n![i](img.png \"t\")\n"
        self.assertEqual([t for _, t in _targets(text)], ["missing.md", "img.png"])


if __name__ == "__main__":
    unittest.main()
