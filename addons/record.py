"""mitmdump script: record streaming LLM responses into a streamtape cassette.

    mitmdump -s addons/record.py --set streamtape_out=cassettes/session.tape

Options: see ``streamtape.mitm.record`` (or ``mitmdump -s addons/record.py --options``).
"""

from streamtape.mitm.record import RecordAddon

addons = [RecordAddon()]
