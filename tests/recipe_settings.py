"""Settings of the Multi30k recipe that it refuses (tests/recipe_test.py):
each run exits 1 with a line naming the setting, before anything trains."""
import os

from recipe_util import check, recipe


def bad_settings(source, env, tmp):
    for extra, words in (({"NMT_DISTILL_PICK": "best"}, "NMT_DISTILL_PICK must be one of"),
                         ({"NMT_DISTILL_PICK": "reranked", "NMT_R2L": "0"}, "needs right-to-left models"),
                         ({"NMT_DISTILL_PICK": "bidiverse"}, "needs channel models"),
                         ({"NMT_JOBS": "0"}, "NMT_JOBS must be at least 1"),
                         ({"NMT_STUDENT_FLAGS": "--dec-hidden 64"}, "NMT_STUDENT_FLAGS needs NMT_STUDENT_NAME"),
                         ({"NMT_STUDENT_NAME": "Wide"}, "NMT_STUDENT_NAME must be lowercase"),
                         ({"NMT_STUDENT_NAME": "wide", "NMT_DISTILL": "0"}, "needs students to name"),
                         ({"NMT_ENSEMBLE": "every"}, "NMT_ENSEMBLE must be pick or all"),
                         ({"NMT_ENSEMBLE": "all", "NMT_DISTILL": "0"}, "it needs NMT_DISTILL"),
                         ({"NMT_GENERATIONS": "0"}, "NMT_GENERATIONS must be at least 1"),
                         ({"NMT_ENSEMBLE_WEIGHTS": "yes"}, "NMT_ENSEMBLE_WEIGHTS must be 0 or 1"),
                         ({"NMT_STUDENT_NAME": "g2"}, "is the tag of an NMT_ENSEMBLE"),
                         ({"NMT_WORD_KD": "1.5", "NMT_STUDENT_NAME": "kd"}, "NMT_WORD_KD must be a weight"),
                         ({"NMT_WORD_KD": "0.5"}, "NMT_WORD_KD needs NMT_STUDENT_NAME"),
                         ({"NMT_RERANK_BEAM": "1"}, "NMT_RERANK_BEAM must be a beam of 2 to 64"),
                         ({"NMT_MBR": "yes"}, "NMT_MBR must be 0 or 1"),
                         ({"NMT_GENERATIONS": "2", "NMT_DISTILL": "0"}, "needs students to teach")):
        run = f"{tmp}/bad"
        rc, out = recipe(source, {**env, "NMT_RUN": run}, **extra)
        check(rc == 1 and words in out, f"{extra} fails with '{words}' (got {rc}: {out[-500:]})")
        check(not os.path.exists(f"{run}/model-1"), f"{extra} fails before anything trains")
