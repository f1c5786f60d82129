"""A word-level language model in the style of the word_language_model example: embedding,
a two-layer LSTM or GRU, a decoder (optionally tied to the embedding), truncated BPTT over a
batchified corpus with hidden-state repackaging, gradient clipping, a hand-written SGD update,
validation in eval mode with lr annealing, and checkpoint-and-resume between epochs.

With ``checkpoint=path`` the run saves a checkpoint after half the epochs, throws the model
away, builds a fresh one (from different weights) and loads the checkpoint back before going
on: its numbers must equal an uninterrupted run's."""
from __future__ import annotations

import numpy as np

from ._common import seed_weights

NTOKEN, BPTT, BATCH, EVAL_BATCH = 20, 6, 4, 2


def make_corpus(n: int, rng) -> np.ndarray:
    """A token stream with structure to learn: counting runs (k, k+1, k+2, ...) with noise."""
    out, k = [], 0
    while len(out) < n:
        k = int(rng.integers(NTOKEN)) if rng.random() < 0.2 else (k + 1) % NTOKEN
        out.append(k)
    return np.asarray(out, dtype=np.int64)


def main(torch, steps: int = 2, rnn_type: str = "LSTM", tied: bool = True, checkpoint: str | None = None):
    nn = torch.nn

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.0, tie_weights=False):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                if nhid != ninp:
                    raise ValueError("When using the tied flag, nhid must be equal to emsize")
                self.decoder.weight = self.encoder.weight
            self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, self.ntoken)
            return torch.nn.functional.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                        weight.new_zeros(self.nlayers, bsz, self.nhid))
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        return data.view(bsz, -1).t().contiguous()

    def get_batch(source, i):
        seq_len = min(BPTT, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)

    def repackage_hidden(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    def build(seed):
        model = RNNModel(rnn_type, NTOKEN, 16, 16, 2, tie_weights=tied)
        seed_weights(torch, model, seed=seed)
        return model

    def evaluate(model, source):
        model.eval()
        total_loss = 0.0
        hidden = model.init_hidden(EVAL_BATCH)
        with torch.no_grad():
            for i in range(0, source.size(0) - 1, BPTT):
                data, targets = get_batch(source, i)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(source) - 1)

    rng = np.random.default_rng(3)
    train_data = batchify(torch.from_numpy(make_corpus(4 * BATCH * BPTT + 1, rng)), BATCH)
    val_data = batchify(torch.from_numpy(make_corpus(2 * EVAL_BATCH * BPTT + 1, rng)), EVAL_BATCH)
    criterion = nn.NLLLoss()
    model = build(seed=7)
    lr, clip, best_val_loss = 2.0, 0.25, None

    history = []
    for epoch in range(1, steps + 1):
        if checkpoint is not None and epoch == steps // 2 + 1:
            torch.save({"epoch": epoch, "lr": lr, "best_val_loss": best_val_loss,
                        "model_state_dict": model.state_dict()}, checkpoint)
            del model
            model = build(seed=99)                         # a new process would start here
            state = torch.load(checkpoint, map_location="cpu")
            model.load_state_dict(state["model_state_dict"])
            lr, best_val_loss = state["lr"], state["best_val_loss"]

        model.train()
        hidden = model.init_hidden(BATCH)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, BPTT)):
            data, targets = get_batch(train_data, i)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            history.append(loss.item())

        val_loss = evaluate(model, val_data)
        history.append(val_loss)
        if best_val_loss is None or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            lr /= 4.0
        history.append(lr)
    return history
