"""URL blacklist filtering: compressed AVL tree, pass-by filter."""
