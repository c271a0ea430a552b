for i, (x, y) in enumerate(loader):
    if i >= max_steps:
        break
    opt.zero_grad()
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
