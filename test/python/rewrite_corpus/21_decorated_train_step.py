# batch: x y
@torch.compiler.disable
def train_step(x, y):
    opt.zero_grad()
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
    return loss


for x, y in loader:
    train_step(x, y)
