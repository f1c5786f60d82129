"""PyTorch's word_language_model, 2-layer LSTM (emb 200, hidden 200), trained for a fixed
number of bptt windows (35 tokens x batch 20) of one token stream: truncated BPTT with the
hidden state carried over, gradient clipping at 0.25, SGD lr 20."""
import _program
import models

if __name__ == "__main__":
    _program.run(__doc__, models.lstm_step, models.lstm_batches)
