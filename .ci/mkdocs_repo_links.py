"""mkdocs hook: renders the docs' code-host Markdown as a code host does.

- A link from a page to a file outside docs/ (../config.example.yaml,
  ../examples/python) points at the repository on the site, as it resolves
  on the code host. A link to a file that does not exist in the repository
  fails the build in --strict mode.
- Lists: a code host starts a list right after a paragraph line and nests
  by two spaces; Python-Markdown needs a blank line before a list and four
  spaces to nest. Outside code fences, indentation is doubled and a blank
  line is put before a list that follows a paragraph.
"""
import logging
import os
import re

log = logging.getLogger("mkdocs.plugins.repo_links")
LINK = re.compile(r"(\]\()(\.\./[^)\s#]+)(#[^)\s]*)?(\))")
ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")


def on_page_markdown(markdown, page, config, files):
    docs = config["docs_dir"]
    root = os.path.dirname(os.path.abspath(docs))
    base = config["repo_url"].rstrip("/")

    def rewrite(m):
        rel = os.path.normpath(os.path.join(os.path.dirname(page.file.src_path), m.group(2)))
        if not rel.startswith(".."):
            return m.group(0)
        path = os.path.normpath(os.path.join(docs, os.path.dirname(page.file.src_path), m.group(2)))
        repo_rel = os.path.relpath(path, root)
        if not os.path.exists(path):
            log.warning("%s links to %s, which is not in the repository", page.file.src_path, repo_rel)
            return m.group(0)
        kind = "tree" if os.path.isdir(path) else "blob"
        return "%s%s/%s/main/%s%s%s" % (m.group(1), base, kind, repo_rel, m.group(3) or "", m.group(4))

    fence = None  # the indentation of the open fence's opening line
    out = []
    prev = ""
    for line in markdown.split("\n"):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if fence is not None:
            # Inside a fence: keep its lines where the doubled fence put them.
            out.append(" " * fence + line[min(indent, fence // 2):] if fence else line)
            if stripped.startswith("```"):
                fence = None
            prev = line
            continue
        if stripped.startswith("```"):
            fence = indent * 2
            out.append(" " * fence + stripped)
            prev = line
            continue
        stripped = LINK.sub(rewrite, stripped)
        line = " " * (indent * 2) + stripped
        if not indent and ITEM.match(line) and prev.strip() and not ITEM.match(prev) and not prev.startswith(" ") \
                and not prev.lstrip().startswith(("|", "#", "<")):
            out.append("")
        out.append(line)
        prev = line
    return "\n".join(out)
