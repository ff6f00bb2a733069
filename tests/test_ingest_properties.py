"""Property: any mix of good and corrupted lines conserves counts and never quarantines a good line."""

import json
import tempfile
from datetime import date
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest import ingest_folder
from tests.conftest import LOAD_DATE, feedback, interaction, memory, write_landing

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
good_events = st.one_of(
    st.builds(lambda t, o: interaction(input=t or "q", output=o), texts, texts),
    st.builds(lambda c, r: feedback(comment=c, rating=r), texts, st.integers(1, 5)),
    st.builds(lambda c: memory(content=c or "x"), texts),
)


def _drop(field: str):
    return lambda event: json.dumps({k: v for k, v in event.items() if k != field}).encode()


CORRUPTIONS = {
    "truncated": lambda event: json.dumps(event).encode()[:-2],
    "invalid_utf8": lambda event: json.dumps(event).encode()[:-1] + b'"\xff\xfe"}',
    "no_event_id": _drop("event_id"),
    "no_tenant": _drop("tenant_id"),
    "bad_tenant": lambda event: json.dumps({**event, "tenant_id": "a/b"}).encode(),
    "future": lambda event: json.dumps({**event, "ts": "2030-01-01T00:00:00Z"}).encode(),
    "array": lambda event: json.dumps([event]).encode(),
}

lines = st.lists(
    st.tuples(good_events, st.sampled_from([None, *CORRUPTIONS])), min_size=1, max_size=25
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines, st.booleans())
def test_conservation_and_no_false_quarantine(mix, resend) -> None:
    encoded, good_ids, bad = [], [], 0
    for n, (event, corruption) in enumerate(mix):
        event = {**event, "event_id": f"e{n}"}
        if corruption is None:
            encoded.append(json.dumps(event, ensure_ascii=False).encode())
            good_ids.append(event["event_id"])
        else:
            encoded.append(CORRUPTIONS[corruption](event))
            bad += 1
    if resend and good_ids:
        encoded.append(encoded[next(i for i, (_, c) in enumerate(mix) if c is None)])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / LOAD_DATE
        write_landing(folder, encoded)
        result = ingest_folder(folder, date.fromisoformat(LOAD_DATE))
    assert result.lines_read == len(encoded)
    assert result.conserved
    assert sorted(result.events["event_id"].to_list()) == sorted(good_ids)
    assert result.quarantine.height == bad
    assert result.duplicates == (1 if resend and good_ids else 0)
