"""No file of the repository refers to a file its users do not have.

The project was written beside notes and data outside the repository; a
pointer to them (a design or reference note, or a sibling `shared` folder)
means nothing to a user. Facts are stated here, with their public source, or
point to docs/. Fails naming each file and line that points outside.
"""

import os
import re
import subprocess

from absl.testing import absltest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Built from pieces, so that this file does not match itself.
_OUTSIDE = re.compile("|".join(re.escape(name) for name in (
    "DESIGN" + ".md", "REFERENCE" + ".md", "STYLE" + ".md", ".." + "/shared")))


def _tracked_files():
    """The repository's tracked files (every file under it without git)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=_REPO, check=True,
                             capture_output=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "results", "__pycache__"}
        paths = []
        for root, dirs, names in os.walk(_REPO):
            dirs[:] = [d for d in dirs if d not in skip]
            paths += [os.path.relpath(os.path.join(root, n), _REPO) for n in names]
        return paths


class OutsideReferencesTest(absltest.TestCase):

    def test_no_file_points_outside_the_repository(self):
        found = []
        for path in _tracked_files():
            if path.startswith(".ci/"):
                continue
            try:
                with open(os.path.join(_REPO, path), encoding="utf-8") as f:
                    text = f.read()
            except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
                continue  # binary data, or deleted in the working tree
            for number, line in enumerate(text.splitlines(), 1):
                if _OUTSIDE.search(line):
                    found.append(f"{path}:{number}: {line.strip()}")
        self.assertEqual(found, [], "files that point outside the repository:\n"
                         + "\n".join(found))


if __name__ == "__main__":
    absltest.main()
