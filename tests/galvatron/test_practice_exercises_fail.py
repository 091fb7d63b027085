"""The exercises of "From the paper to practice" (chapter 9): each reference is accepted, and each check
rejects the answer a reader would give with the mistake the exercise is about (not only a random number)."""

import pytest

from lib import exercises
from lib.galvatron import exercises_practice as ex
from lib.galvatron.search.activations import layer_activation_bytes
from lib.galvatron.search.schedules import bubble_fraction
from lib.galvatron.search.zero import state_bytes_per_param


def _wrong_answers():
    g = ex.GPT3
    return {
        # ZeRO-1 keeps the whole gradient: 2 + 4 + 12/64
        "ch9.1": [state_bytes_per_param(1, 64, 2, 4, 12), 2 + 14 / 64, 16 / 64],
        # plain 1F1B's bubble (pp - 1)/m, and GPipe's (the same), and a vp in the numerator
        "ch9.2": [bubble_fraction("1f1b", 16, 16), 2 * 15 / 16],
        # without sequence parallelism, and with the scores kept
        "ch9.3": [layer_activation_bytes(g["s"], 1, g["h"], g["a"], g["ffn"], 8, recompute="selective") / 1e6,
                  layer_activation_bytes(g["s"], 1, g["h"], g["a"], g["ffn"], 8, sp=True) / 1e6],
        "ch9.4": ["shape-dependent efficiency", "mixed precision", "ZeRO stages", "Pipeline Schedules"],
        # the published configuration's own estimate, and the pick under 2021's stack, are not today's pick
        "ch9.5": [ex._pick()["est_published"]["tokens_per_s_per_gpu"], ex._pick()["est_pick"]["tokens_per_s_per_gpu"]],
        # the fill's value itself, the inverse ratio, no change
        "ch9.6": [8, 1 / ex.fill_gain(), 1.0],
        # the lead, the high end, one estimate off (not both), the H100's error (not the A100's), no lead
        "ch9.7": _lead_wrong(),
    }


def _lead_wrong():
    from lib.galvatron.plausibility import lead_range, stated_error

    p = ex._pick()
    pick, pub = p["est_pick"]["tokens_per_s_per_gpu"], p["est_published"]["tokens_per_s_per_gpu"]
    err, h100 = stated_error(ex.pick_gpu()), stated_error("h100-sxm-80gb")
    r = lead_range(pick, pub, err)
    return [r["lead"], r["high"], pick / pub * (1 - err) - 1, lead_range(pick, pub, h100)["low"], 0.0]


def test_the_chapter_has_seven_exercises_in_its_answer_key():
    assert sorted(exercises.references(9)) == [f"ch9.{k}" for k in range(1, 8)]


@pytest.mark.parametrize("ex_id", [f"ch9.{k}" for k in range(1, 8)])
def test_reference_right_and_wrong_answers_rejected(ex_id):
    ref = exercises.reference(ex_id)
    value = ref.answer()
    assert exercises.check(ex_id, value)
    for wrong in _wrong_answers()[ex_id]:
        assert not exercises.check(ex_id, wrong), (ex_id, wrong, value)


def test_references_match_hand_calculations():
    assert exercises.reference("ch9.1").answer() == pytest.approx(2 + (4 + 12) / 64)
    assert exercises.reference("ch9.2").answer() == pytest.approx(15 / 32)
    s, h, t = 2048, 12288, 8
    assert exercises.reference("ch9.3").answer() == pytest.approx(34 * s * h / t / 1e6)   # Korthikanti Table 2


def test_todays_stack_offers_more_than_2021s_for_the_sc21_pick():
    from lib.galvatron.practice_report import calibration_runs, picks

    own = picks(calibration_runs(), [ex.PICK_RUN])[ex.PICK_RUN]      # the run's stack, megatron-lm-2021
    today = ex._pick_today()
    assert own["pick"].zero == 0 and not own["pick"].sequence_parallel and own["pick"].recompute != "selective"
    assert today["pick"].zero > 0                                     # an option 2021's stack lacked
    assert today["est_pick"]["tokens_per_s_per_gpu"] > own["est_pick"]["tokens_per_s_per_gpu"]


def test_the_fill_exercise_prices_the_same_layout_at_vp_1():
    # the fill (vp 8, one layer per chunk, as Llama 3's paper describes) is faster than plain 1F1B
    from lib.galvatron.practice_report import calibration_runs
    from lib.galvatron.validate import estimate_run

    run = next(r for r in calibration_runs() if r.name == ex.FILL_RUN)
    assert run.config.vp is None and estimate_run(run, "practice")["config"].vp == 8
    assert ex.fill_gain() > 1


def test_the_pick_exercise_is_the_low_end_of_the_lead():
    from lib.galvatron.plausibility import lead_range, stated_error

    p = ex._pick()
    r = lead_range(p["est_pick"]["tokens_per_s_per_gpu"], p["est_published"]["tokens_per_s_per_gpu"],
                   stated_error("a100-sxm-80gb"))
    assert ex.pick_gpu() == "a100-sxm-80gb"          # SC'21 ran on A100s: the A100's stated error applies
    assert r["low"] < r["lead"] < r["high"] and ex.pick_lead_low() == pytest.approx(r["low"])
