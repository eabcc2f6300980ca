"""Lesson 13, Failures and recovery: reference solutions."""


def which_failures_restore():
    """A TF1 worker and a TF2 worker hold no state (a new session; a function run again); a
    ps loses its variables, a TF1 chief restores at its session's start, and a TF2
    coordinator loses the training loop: b, c, e and f restore."""
    return {"b", "c", "e", "f"}


def why_the_chief_restores():
    """The chief's SessionManager.prepare_session restores the latest checkpoint of
    checkpoint_dir first, whatever the ps holds."""
    return "a"


def predict_chief_restart():
    """Checkpoints at steps 0, 4, 8...: the latest before step 6 is model.ckpt-4; the
    restarted chief restores it over the ps's variables, and steps 5 and 6 are redone."""
    return 4, 2


def predict_restart_epoch():
    """Epochs 0-2's checkpoints are complete; epoch 3's save was cut short by the failure at
    1.96 ms (before 1.976 ms), so the coordinator restores iterations 12 and starts again at
    epoch 12 // 4 = 3. Functions: epochs 0-3 (16), epoch 4's 4 scheduled while epoch 3's
    checkpoint was being saved (cancelled), then epochs 3, 4 and 5 again (12): 32."""
    return 3, 32
