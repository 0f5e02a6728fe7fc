"""mitmdump script: answer matching requests from streamtape cassettes, with recorded timing.

    mitmdump -s addons/replay.py --set streamtape_cassette=cassettes/session.tape \
        [--set streamtape_profile=faithful] [--set streamtape_unmatched=refuse]

Requests no recording answers go upstream (or get a 404 with
``streamtape_unmatched=refuse``). Options: see ``streamtape.mitm.replay``
(or ``mitmdump -s addons/replay.py --options``).
"""

from streamtape.mitm.replay import ReplayAddon

addons = [ReplayAddon()]
