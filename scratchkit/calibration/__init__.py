"""Calibrating this machine: its hardware profile's speeds, measured with the kit's own calls."""
