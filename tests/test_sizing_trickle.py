"""A family whose decode-step table alone shows that no rate meets the objective is answered without its
serving model (goodput_search.trickle_miss, issue 31): the certificate must never drop a family that the
full evaluation would give options."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.serving import sizing
from planner.serving.sizing_request import parse_sizing


@given(model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-235b-a22b", "gpt-oss-120b"]),
       gpu=st.sampled_from(["h100-sxm", "l40s", "mi300x", "a10g", "b200"]), tp=st.sampled_from([1, 2, 4, 8]),
       weights=st.sampled_from(["bf16", "fp8", "int4"]), itl_ms=st.floats(2.0, 80.0),
       tpot_ms=st.one_of(st.none(), st.floats(2.0, 80.0)), arrival_cv=st.sampled_from([0.5, 1.0, 2.0, 5.0]),
       percentile=st.sampled_from([50, 90, 99]), output_len=st.sampled_from([2, 50, 400]))
@settings(max_examples=40, deadline=None)
def test_a_trickle_miss_has_no_option(model, gpu, tp, weights, itl_ms, tpot_ms, arrival_cv, percentile,
                                      output_len):
    """Source: invariant: wherever trickle_miss gives a reason, the family's full evaluation (its serving
    model and confirmed rate) finds no option either, so answering it from the step table changes no
    option."""
    slo = {"ttft_ms": 5000.0, "itl_ms": itl_ms, "percentile": percentile,
           **({"tpot_ms": tpot_ms} if tpot_ms is not None else {})}
    req = parse_sizing({"model": model, "gpus": [gpu], "tp": [tp], "weights": [weights], "slo": slo,
                        "traffic": {"requests_per_s": 2.0, "prompt_len": 1000, "output_len": output_len,
                                    "arrival_cv": arrival_cv}})
    for fam in sizing._families(req):
        prep = sizing._prepare(req, fam)
        if isinstance(prep, sizing.FamilyResult) or prep.trickle_miss is None:
            continue
        assert "decode step" in prep.trickle_miss
        assert sizing._evaluate(req, prep, lazy=True).options == []
