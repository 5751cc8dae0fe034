"""The selection on val of the Multi30k recipe (scripts/multi30k.py): each
candidate (a model's checkpoint, an ensemble) translates val under search
settings, every score goes to the selection log, and the best is kept. A
translation made earlier with the same models and nmt-translate, and newer
than its inputs, is reused (multi30k_cache.py)."""
import concurrent.futures
import itertools
import os

from multi30k_cache import cached, record, translator


def weight_args(weights):
    """nmt-translate's arguments for an ensemble's WEIGHTS (a list, one per
    model; None or empty: all equal, no arguments)."""
    return ["--ensemble-weights", *(str(w) for w in weights)] if weights else []


def weights_key(weights):
    """What WEIGHTS add to a translation's cache key: nothing when equal (the
    key made before weights existed), else " weights W1 W2 ..."."""
    return f" weights {' '.join(str(w) for w in weights)}" if weights else ""


def translation_name(name, beam, lp):
    """The selection's name for candidate NAME's val translation at BEAM and
    length penalty LP: NAME-bBEAM, with -lpLP unless at beam 5, lp 1.0."""
    return f"{name}-b{beam}" + ("" if (int(beam), str(lp)) == (5, "1.0") else f"-lp{lp}")


class Selection:
    """The selection methods of multi30k.Recipe, which gives them its run and
    sel folders, bin, key, jobs, tags, log_rows and single, path() and
    nmt_translate()."""

    def translate(self, name, beam, lp, models, split="val", weights=None):
        """The val score of MODELS (weighted by WEIGHTS: weight_args()) at BEAM
        and length penalty LP (reused when an earlier run made it with the same
        models, weights and nmt-translate, and nothing is newer)."""
        out = f"{self.sel}/{name}"
        made = " ".join(models) + weights_key(weights) + f" | nmt-translate {translator(self.bin)}"
        inputs = [self.path(f"{split}.{self.src}"), self.path(f"{split}.{self.tgt}")] + list(models)
        score = cached(out, made, inputs, self.key)
        if score is not None:
            return score
        self.nmt_translate(models, [*weight_args(weights), "-b", str(beam), "--length-penalty", str(lp), "-i", inputs[0],
                                    "-o", out + ".out", "--reference", inputs[1],
                                    "--scores-json", out + ".json"], out + ".log")
        return record(out, made, self.key)

    def output(self, system):
        """The val translation of SYSTEM (its name, models, beam and length
        penalty, and weights where it has them) under the name the selection
        gives it, made now where it is not there or is stale. Dies as
        translate() does."""
        beam, lp = system["beam"], str(system["lp"])
        name = translation_name(system["name"], beam, lp)
        self.translate(name, beam, lp, system["models"], weights=system.get("weights"))
        return f"{self.sel}/{name}.out"

    def translate_many(self, items):
        """translate() of every (name, beam, lp, models) or (name, beam, lp,
        models, weights) of ITEMS, NMT_JOBS at a time; their scores in order.
        Dies as translate() does."""
        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            return list(pool.map(lambda item: self.translate(*item[:4], weights=(item + (None,))[4]), items))

    def logged(self, name, beam, lp, score):
        self.log_rows.append((name, beam, lp, score))
        with open(f"{self.sel}/selection{self.out_tag}.tsv", "w") as f:
            f.write(f"candidate\tbeam\tlength_penalty\tval_{self.key}\n")
            for row in self.log_rows:
                f.write("\t".join(str(x) for x in row) + "\n")
        return score

    def at_b5(self, name):
        return next((s for n, b, lp, s in self.log_rows if n == name and b == 5 and lp == "1.0"), None)

    def score_models(self, folders):
        """Each model's best and average checkpoints at beam 5, lp 1.0; keeps the best single one."""
        runs = [(f"{os.path.basename(folder)}-{ckpt}", f"{folder}/{ckpt}.ckpt")
                for folder in folders for ckpt in ("best", "average") if os.path.exists(f"{folder}/{ckpt}.ckpt")]
        scores = self.translate_many([(f"{name}-b5", 5, "1.0", [path]) for name, path in runs])
        for (name, path), score in zip(runs, scores):
            self.logged(name, 5, "1.0", score)
            if score > self.single["score"]:
                self.single = {"name": name, "models": [path], "score": score, "beam": 5, "lp": "1.0"}

    def members(self, folders):
        """Each model's better checkpoint on val (best or average)."""
        out = []
        for folder in folders:
            b = self.at_b5(f"{os.path.basename(folder)}-best")
            a = self.at_b5(f"{os.path.basename(folder)}-average")
            out.append(f"{folder}/average.ckpt" if a is not None and a > b else f"{folder}/best.ckpt")
        return out

    def tune(self, name, models):
        """Beam 5 and 10 by length penalty 0.6, 1.0, 1.4 on val (beam 5, lp 1.0
        logged already) -> the best {beam, lp, score} and the best lp at beam 5."""
        best = {"beam": 5, "lp": "1.0", "score": self.at_b5(name)}
        best5 = dict(best)
        settings = [(beam, lp) for beam, lp in itertools.product((5, 10), ("0.6", "1.0", "1.4")) if (beam, lp) != (5, "1.0")]
        scores = self.translate_many([(translation_name(name, beam, lp), beam, lp, models) for beam, lp in settings])
        for (beam, lp), score in zip(settings, scores):
            self.logged(name, beam, lp, score)
            if score > best["score"]:
                best = {"beam": beam, "lp": lp, "score": score}
            if beam == 5 and score > best5["score"]:
                best5 = {"beam": 5, "lp": lp, "score": score}
        return best, best5["lp"]

    def tuned_ensemble(self, name, folders):
        """The ensemble NAME of FOLDERS' better checkpoints (members()), scored at
        beam 5, lp 1.0 and tuned: {name, models, beam, lp, score}. Dies as
        translate() does."""
        members = self.members(folders)
        self.ensemble_b5(name, members)
        tuned, _ = self.tune(name, members)
        return {"name": name, "models": members, **tuned}

    def ensemble_b5(self, name, models):
        self.logged(name, 5, "1.0", self.translate(f"{name}-b5", 5, "1.0", models))
