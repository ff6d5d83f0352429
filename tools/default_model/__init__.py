"""Parts of tools/train_default_model.py's recipe, one concern per module (issue 52 moves the rest here):

    copying   generated documents that copy from their own context: prose sentences repeated, names introduced
              and reused, lists continued; and the held-out prompts that measure it on the validation prose
    facts     the fact table in many phrasings, the bare copula ("The capital of X is") and the reversed form
              ("Paris is the capital of") held out for measuring
    training  the resumable, deterministic training loop: the data of step s is a function of (seed, s) only,
              checkpoints every few minutes, --resume continues to the same bits as an uninterrupted run
"""
