"""One module per CLI command (or small group of commands).

Each module defines ``commands``: a list of click commands. ``streamtape.cli``
discovers the modules here, so adding a command never touches a shared file.
"""
