"""Property: any mix of good and corrupted lines conserves counts and never quarantines a good line."""

import gzip
import json
import tempfile
from datetime import date
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.folder import ingest_folder
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
    "duplicate_key": lambda event: json.dumps(event).encode()[:-1] + b', "tenant_id": "x"}',
    "nan": lambda event: json.dumps(event).encode()[:-1] + b', "importance": NaN}',
    "trailing_comma": lambda event: json.dumps(event).encode()[:-1] + b",}",
    # Whitespace RFC 8259 does not allow, after the first key's colon.
    "form_feed": lambda event: json.dumps(event).encode().replace(b'": ', b'":\x0c', 1),
    "no_break_space": lambda event: json.dumps(event).replace('": ', '":\u00a0', 1).encode(),
    "year_zero": lambda event: json.dumps({**event, "ts": "0000-01-01T00:00:00Z"}).encode(),
    "offset_no_colon": lambda event: json.dumps(
        {**event, "ts": "2026-11-02T10:00:00+0100"}
    ).encode(),
}

lines = st.lists(
    st.tuples(good_events, st.sampled_from([None, *CORRUPTIONS])), min_size=1, max_size=25
)


# Good lines are written with any RFC 8259 whitespace between their tokens.
separators = st.tuples(*[st.text(alphabet=" \t\r", max_size=2)] * 4).map(
    lambda s: (f"{s[0]},{s[1]}", f"{s[2]}:{s[3]}")
)


@settings(
    derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(lines, st.booleans(), separators)
def test_conservation_and_no_false_quarantine(mix, resend, separators) -> None:
    encoded, good_ids, bad = [], [], 0
    for n, (event, corruption) in enumerate(mix):
        event = {**event, "event_id": f"e{n}"}
        if corruption is None:
            line = json.dumps(event, ensure_ascii=False, separators=separators)
            encoded.append(line.encode())
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


@settings(
    derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.integers(1, 40), st.data())
def test_damaged_gzip_keeps_a_prefix_and_conserves(n: int, data: st.DataObject) -> None:
    body = b"".join(json.dumps(interaction(f"e{k:02d}")).encode() + b"\n" for k in range(n))
    gz = gzip.compress(body, mtime=0)
    damage = data.draw(st.sampled_from(["cut", "flip", "append"]))
    at = data.draw(st.integers(0, len(gz) - 1))
    if damage == "cut":
        gz = gz[:at]
    elif damage == "flip":
        gz = gz[:at] + bytes([gz[at] ^ 0xFF]) + gz[at + 1 :]
    else:
        gz += data.draw(st.binary(min_size=1, max_size=8).filter(lambda b: b.strip(b"\0")))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / LOAD_DATE
        folder.mkdir()
        (folder / "a.jsonl.gz").write_bytes(gz)
        result = ingest_folder(folder, date.fromisoformat(LOAD_DATE))
    assert result.conserved
    ids = result.events["event_id"].to_list()
    assert ids == [f"e{k:02d}" for k in range(len(ids))]  # only lines before the damage
    assert result.events["input"].unique().to_list() in ([], ["Where is my order?"])
    # A flipped byte near the end can decode into extra lines before zlib notices: they are
    # quarantined (never stored as events), and the file's damage is always named.
    assert result.quarantine.height == result.lines_read - len(ids)
