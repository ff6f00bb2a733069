"""The NER's gate (issue 53 item 6), measured: on the labelled PII corpus, the shared LoCoMo turns
(skipped without `../shared/data/locomo/`) and a generated night's texts (`sections_pii_pack`'s
questions and answers), each corpus's distinct texts are analysed with the NER gated as before
(`rules.may_hold_name`) and as now (`ner_gate.needs_ner`), in turn, `--reps` times: the texts the
NER read, ms per text, each detector's cost, and every text whose redaction differs. Times are
this process's CPU time (`time.process_time`), which other work on a shared machine changes less
than the wall clock.

    python -m bench.ner_gate                      # 1,500 generated memories (~2,300 texts)
    python -m bench.ner_gate --night-memories 5000 --reps 3

Prints one JSON record (with the machine and commit) and writes it to
bench/results/<date>-ner-gate.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.machine import commit, load_average, machine

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
detect = importlib.import_module("pipeline.pii.detect")


def corpora(night_memories: int) -> dict[str, list[str]]:
    """Each corpus's distinct texts."""
    from bench.sections_pii_pack import generator_text
    from pipeline.generate.pii_corpus import corpus, look_alikes_world

    labelled = [r.text for r in corpus()] + [r.text for r in look_alikes_world()]
    night = [generator_text(p, i) for i in range(night_memories) for p in ("text", "answer")]
    found = {"labelled": labelled, "locomo": locomo_turns(), "night": night}
    return {name: list(dict.fromkeys(texts)) for name, texts in found.items() if texts}


def locomo_turns(folder: Path = LOCOMO) -> list[str]:
    """Every turn of the shared LoCoMo conversations as the importer writes it ("Nate: …"); none
    without the data."""
    texts = []
    for file in sorted(folder.glob("conv-*.json")):
        data = json.loads(file.read_text())
        body = data.get("conversation", data)
        for key, turns in body.items():
            if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                texts += [f"{t['speaker']}: {t.get('text') or ''}".rstrip() for t in turns]
    return texts


class Meter:
    """CPU seconds per detector (presidio's recognizers, spaCy's NER and tokenizer, the gate) and
    texts the NER read, counted while `detect._docs` and the recognizers are replaced by timed
    ones."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.read: Counter[str] = Counter()
        analyzer, _ = detect.analysis_engine()
        for recognizer in analyzer.registry.recognizers:
            recognizer.analyze = self._timed(recognizer.name, recognizer.analyze)
        detect._docs = self._docs

    def _timed(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds[name] += time.process_time() - start

        return timed

    def _docs(self, nlp: Any, texts: list[str], ner: bool) -> Iterator[Any]:
        start = time.process_time()
        needs = [ner and detect.needs_ner(text) for text in texts]
        self.seconds["the gate"] += time.process_time() - start
        self.read.update(ner=sum(needs), gated=len(texts))
        tagged = nlp.pipe((t for t, n in zip(texts, needs, strict=True) if n), batch_size=256)
        for text, need in zip(texts, needs, strict=True):
            start = time.process_time()
            doc = next(tagged) if need else nlp.make_doc(text)
            self.seconds["spaCy NER" if need else "spaCy tokenizer"] += time.process_time() - start
            yield doc

    def run(self, texts: list[str], gate: Callable[[str], bool]) -> dict[str, Any]:
        self.seconds.clear()
        self.read.clear()
        detect.needs_ner = gate
        start = time.process_time()
        out = detect.analyse(texts)
        seconds = time.process_time() - start
        per_text = {k: v / len(texts) * 1000 for k, v in self.seconds.items()}
        return {"out": out, "s": seconds, "ner": self.read["ner"], "by_detector": per_text}


def measure(texts: list[str], meter: Meter, reps: int) -> dict[str, Any]:
    """Both gates on `texts`, alternating (old, new, new, old, …) so a busy neighbour slows both."""
    from pipeline.pii.ner_gate import needs_ner
    from pipeline.pii.rules import may_hold_name

    gates = {"before": may_hold_name, "gated": needs_ner}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "gated": []}
    for rep in range(reps):
        for name in ("before", "gated") if rep % 2 == 0 else ("gated", "before"):
            runs[name].append(meter.run(texts, gates[name]))
    record: dict[str, Any] = {"texts": len(texts)}
    for name, done in runs.items():
        best = min(done, key=lambda r: r["s"])
        record[name] = {
            "ner_texts": best["ner"],
            "ner_share": round(best["ner"] / len(texts), 4),
            "ms_per_text": [round(r["s"] / len(texts) * 1000, 3) for r in done],
            "ms_per_text_by_detector": {
                k: round(v, 4)
                for k, v in sorted(best["by_detector"].items(), key=lambda kv: -kv[1])
            },
        }
    pairs = zip(texts, runs["before"][0]["out"], runs["gated"][0]["out"], strict=True)
    differ = [{"text": t, "before": a, "gated": b} for t, a, b in pairs if a != b]
    return {**record, "differ": len(differ), "differences": differ[:20]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--night-memories", type=int, default=1500)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    detect.warm_up()
    meter = Meter()
    record: dict[str, Any] = {"machine": machine(), "commit": commit(), "reps": args.reps}
    for name, texts in corpora(args.night_memories).items():
        record[name] = measure(texts, meter, args.reps)
    record["machine"]["load_avg_at_end"] = load_average()
    text = json.dumps(record, indent=1, ensure_ascii=False)
    print(text)
    day = datetime.now(UTC).date().isoformat()
    (ROOT / "bench" / "results" / f"{day}-ner-gate.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
