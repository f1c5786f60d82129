"""A character model whose recurrent cell is written by hand, as small research programs write it: for
each of 16 positions a Python step of ``nn.Linear``, ``cat``, ``tanh``/``sigmoid`` and elementwise gates
(``--cell rnn``: one tanh layer; ``--cell gru``: reset and update gates), then a linear head over every
position, cross-entropy and AdamW (batch 32, embedding 64, hidden 64, 27 symbols). Every op is small:
the step is bound by each op's fixed cost, forward and backward."""
import _program
import models

BATCH, EMB, HIDDEN, BLOCK, VOCAB = 32, 64, 64, 16, 27


def cell_step(m, rng, tensor, gated: bool):
    """One AdamW step of the hand-written cell model on ``(idx, targets)``."""
    nn, F = m.nn, m.nn.functional

    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.candidate = nn.Linear(EMB + HIDDEN, HIDDEN)
            if gated:
                self.reset = nn.Linear(EMB + HIDDEN, HIDDEN)
                self.update = nn.Linear(EMB + HIDDEN, HIDDEN)

        def forward(self, x, h):
            xh = m.cat([x, h], dim=1)
            if not gated:
                return m.tanh(self.candidate(xh))
            r = m.sigmoid(self.reset(xh))
            h_bar = m.tanh(self.candidate(m.cat([x, r * h], dim=1)))
            z = m.sigmoid(self.update(xh))
            return (1 - z) * h + z * h_bar

    class CellLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.start = nn.Parameter(m.zeros(1, HIDDEN))
            self.embed = nn.Embedding(VOCAB, EMB)
            self.cell = Cell()
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, idx):
            emb = self.embed(idx)
            h = self.start.expand((idx.shape[0], -1))
            hiddens = []
            for i in range(idx.shape[1]):
                h = self.cell(emb[:, i, :], h)
                hiddens.append(h)
            return self.head(m.stack(hiddens, 1))

    model = CellLM()
    models.init_weights(m, rng, tensor, model)
    opt = m.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01)

    def step(batch):
        idx, targets = batch
        logits = model(models.as_long(m, idx))
        return models.update(opt, F.cross_entropy(logits.view(-1, VOCAB), models.as_long(m, targets).view(-1)))
    return step


def cell_batches(rng, n: int):
    """Random symbol windows and their next symbols."""
    for _ in range(n):
        idx = rng.integers(0, VOCAB, (BATCH, BLOCK + 1))
        yield idx[:, :-1], idx[:, 1:]


if __name__ == "__main__":
    import argparse
    import sys
    cell = argparse.ArgumentParser(add_help=False)
    cell.add_argument("--cell", choices=("rnn", "gru"), default="rnn")
    known, sys.argv[1:] = cell.parse_known_args()   # the rest is _program's command line
    _program.run(__doc__, lambda m, rng, tensor: cell_step(m, rng, tensor, known.cell == "gru"), cell_batches)
