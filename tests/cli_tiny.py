"""The tiny command-line fit the CLI tests share (not a test module)."""

#: a fit that takes a second: the shallow PLRNN, one BPTT epoch on 400 samples
TINY = ["--model", "shplrnn", "--method", "bptt", "--train-length", "400", "--eval-length", "300",
        "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress"]
