"""Package layout that pyproject.toml cannot express on its own: the top-level prompts/,
recipes/ and data_cards/ folders ship inside the wheel as builder.prompts, builder.recipes
and builder.data_cards, next to every package found under builder/."""

from setuptools import find_packages, setup

SHIPPED = {"builder.prompts": "prompts", "builder.recipes": "recipes", "builder.data_cards": "data_cards"}

setup(packages=find_packages(include=["builder", "builder.*"]) + list(SHIPPED), package_dir=SHIPPED)
