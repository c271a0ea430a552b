for i, (x, y) in enumerate(loader):
    opt.zero_grad()
    tag = f"{i:04d}-{'train'!r}"
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
    print(f"{tag}: {loss.item():.3f} {'ok' if loss.item() < 1 else 'high'}")
