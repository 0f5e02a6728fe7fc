"""The version of this streamtape (one owner: the package face and the cassette writer read it)."""

__version__ = "0.1.0"
