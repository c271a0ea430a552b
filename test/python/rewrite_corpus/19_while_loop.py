# batch: x y
step = 0
it = iter(loader)
while step < 100:
    x, y = next(it)
    opt.zero_grad()
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
    step += 1
