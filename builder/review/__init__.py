"""`build-bench review`: people check a sample of a build's labels in a local page."""
