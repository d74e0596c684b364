"""Passes on the Tile IR, one per module, run in the order pipeline.py lists."""
