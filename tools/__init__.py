"""Scripts of the repository that are not part of the package: the documentation site\x27s generator and checks."""
