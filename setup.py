"""Build hook only; pyproject.toml holds the project's configuration.

The data folders at the repo's top level (prompts/, cluster_configs/, datasets_registry/, recipes/) are the source
of truth. A wheel carries copies of them inside the package, as pipeline_kit/<name>/ (recipes/ as
pipeline_kit/bundled_recipes/; regular files, no symlinks), where pipeline_kit/resources.py finds them. An editable
install reads the top-level folders themselves."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# top-level name: (its name inside the package, required); pipeline_kit/resources.py's IN_PACKAGE names the same
RESOURCES = {
    "prompts": ("prompts", True),
    "cluster_configs": ("cluster_configs", True),
    "datasets_registry": ("datasets_registry", False),
    "recipes": ("bundled_recipes", True),
}


class build_py_with_resources(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the top-level folders in place
        for name, (in_package, required) in RESOURCES.items():
            src = ROOT / name
            if not src.is_dir():
                if required:
                    raise FileNotFoundError(
                        f"{src}: missing; the wheel needs it (an sdist without it? see MANIFEST.in)"
                    )
                continue
            dst = Path(self.build_lib) / "pipeline_kit" / in_package
            shutil.rmtree(dst, ignore_errors=True)  # no file deleted at the top level survives in an old build dir
            # prepared benchmark data (datasets_registry/<name>/*.jsonl) is the user's, not the package's
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.jsonl"))


setup(cmdclass={"build_py": build_py_with_resources})
