# source: a LightningModule's training_step with manual optimization (backward called directly)
# batch: x y
class LitModel(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        opt.zero_grad()
        out = self(x)
        loss = self.loss(out, y)
        loss.backward()
        opt.step()
        return loss
