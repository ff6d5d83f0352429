"""The recipe of Glassbox's default model, one concern per module (tools/train_default_model.py is its command line;
pipeline.run calls the stages in this order):

    corpus      where the files live, what is installed, the prose corpus and its validation split
    curriculum  generated English for the demos (indirect objects, facts, stories, repeats, set phrases) and its
                held-out names, templates and phrasings
    copying     generated documents that copy from their own context: prose sentences repeated, names introduced
                and reused, lists continued; and the held-out prompts that measure it on the validation prose
    facts       the fact table in many phrasings, the bare copula ("The capital of X is") and the reversed form
                ("Paris is the capital of") held out for measuring
    tokenizer   byte-level BPE in GPT-2's format, forced and appended merges, the encoder
    model       the GPT-2 in PyTorch, and growing a trained one into a larger vocabulary
    batches     the training batches: prose, curriculum, repeated spans, repeated random tokens
    training    the resumable, deterministic training loop: the data of step s is a function of (seed, s) only,
                checkpoints every few minutes, --resume continues to the same bits as an uninterrupted run
    export      config.json + F16 model.safetensors in Hugging Face's GPT-2 layout, and reading it back
    evaluation  held-out loss, samples, previous-token and induction heads, the demos' targets
    report      the model's README.md and tests/data/default_model_demos.json
    pipeline    the command's stages in order
"""
