for x, y in loader:
    opt.zero_grad()
    out: torch.Tensor = net(x)
    loss: torch.Tensor = crit(out, y)
    loss.backward()
    opt.step()
