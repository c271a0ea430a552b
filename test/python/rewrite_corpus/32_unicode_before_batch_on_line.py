for x, y in loader:
    opt.zero_grad()
    sortie_é = réseau(x); perte = critère(sortie_é, y)
    perte.backward()
    opt.step()
