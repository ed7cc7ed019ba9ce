"""Depth x length grids: each query's verified evidence placed at chosen depths inside
real padding of chosen lengths (the controlled counterpart of observed positions)."""
