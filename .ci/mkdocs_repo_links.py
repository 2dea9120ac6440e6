"""mkdocs hook: a link from a page to a file outside docs/ (../config.example.yaml,
../examples/python) points at the repository on the site, as it resolves on the
code host. A link to a file that does not exist in the repository fails the build
in --strict mode."""
import logging
import os
import re

log = logging.getLogger("mkdocs.plugins.repo_links")
LINK = re.compile(r"(\]\()(\.\./[^)\s#]+)(#[^)\s]*)?(\))")


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

    in_fence = False
    out = []
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        out.append(line if in_fence else LINK.sub(rewrite, line))
    return "\n".join(out)
