"""HTML pages: what ``diff --html`` and ``show --html`` share (common), and the cassette report (report).

- :mod:`streamtape.render.common`: escaping, the page shell and its
  Content-Security-Policy, the base style with its font stacks, the time axis.
- :mod:`streamtape.render.report`: ``show CASSETTE --html PAGE``, one page per cassette.

The diff page itself lives with the diff (:mod:`streamtape.diff.render_html`)
and is built from :mod:`streamtape.render.common`. Nothing is imported here,
so loading either module loads only what it needs.
"""
