// A Rust `Vec<T>` of structs for the data view: rustc reorders fields
// (here `alive: bool` last and `mass` first, by alignment), which only the
// layout view shows. `step` reads `mass` and `vel` and writes `pos` of
// every particle; `heaviest` reads `mass` only.
//
// Usage: particles   (the capture's window: --function particles::step)

#[derive(Clone, Copy, Debug, Default)]
pub struct Vec3 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

#[derive(Clone, Debug, Default)]
pub struct Particle {
    pub alive: bool,
    pub pos: Vec3,
    pub vel: Vec3,
    pub mass: f64,
    pub id: u32,
}

#[inline(never)]
pub fn step(ps: &mut [Particle], dt: f32) {
    for p in ps.iter_mut() {
        if p.mass > 0.0 {
            p.pos.x += p.vel.x * dt;
            p.pos.y += p.vel.y * dt;
        }
    }
}

#[inline(never)]
pub fn heaviest(ps: &[Particle]) -> f64 {
    let mut m = 0.0;
    for p in ps {
        if p.mass > m {
            m = p.mass;
        }
    }
    m
}

fn main() {
    let mut ps: Vec<Particle> = (0..4096)
        .map(|i| Particle {
            alive: true,
            mass: 1.0 + (i % 7) as f64,
            vel: Vec3 { x: 1.0, y: 2.0, z: 3.0 },
            id: i,
            ..Default::default()
        })
        .collect();
    step(&mut ps, 0.5);
    println!("{} {}", heaviest(&ps), ps[9].pos.y);
}
