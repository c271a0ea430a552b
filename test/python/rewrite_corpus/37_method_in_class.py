class Trainer:
    def __init__(self, net, opt, loader):
        self.net, self.opt, self.loader = net, opt, loader

    def epoch(self):
        for x, y in self.loader:
            self.opt.zero_grad()
            out = self.net(x)
            loss = torch.nn.functional.mse_loss(out, y)
            loss.backward()
            self.opt.step()


Trainer(net, opt, loader).epoch()
