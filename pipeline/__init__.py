"""memorypack: turns AI interaction logs into a verified, versioned memory pack."""

__version__ = "0.1.0"
