"""URL blacklist filtering: compressed AVL tree, pass-by filter."""
import webtap  # noqa: F401  (first: it sets up the process before numpy is imported)
